//go:build unix

package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// result is one side's figures.
type result struct {
	side    string
	elapsed time.Duration // first user message to the last reply shown
	cpu     time.Duration // the bridge process's, over elapsed
	idle    mem           // before the first chat
	end     mem           // at the last reply shown
	load    [2]string     // load average before and after the side ran

	// What the chats show at the end.
	want, shownOnce, twice, outOfOrder, missing, others int

	// Calls at the proxy: message calls (sendMessage, editMessageText),
	// and the rest by method; refused: answered other than 200.
	sends, edits, refused   int
	otherCalls              map[string]int
	perBotMax               int           // message calls in any one second
	minGap                  time.Duration // the shortest gap between two to one chat
	underPace               int           // calls less than perChat after the chat's last
	perReply, editsPerReply float64
}

// score compares what each chat shows with the replies it should: each
// once, in the order the user wrote.
func (r *result) score(chats []int64, want func(int64) []string, shown map[int64][]string) {
	for _, ch := range chats {
		w := want(ch)
		r.want += len(w)
		index := map[string]int{}
		for i, t := range w {
			index[t] = i
		}
		seen := map[string]int{}
		last := -1
		for _, t := range shown[ch] {
			i, ok := index[t]
			if !ok {
				r.others++ // a placeholder, a partial text, another's text
				continue
			}
			seen[t]++
			switch {
			case seen[t] > 1:
				r.twice++
			case i < last:
				r.outOfOrder++
			default:
				r.shownOnce++
				last = i
			}
		}
		for _, t := range w {
			if seen[t] == 0 {
				r.missing++
			}
		}
	}
}

// count reads the proxy's record; answered is the replies shown.
func (r *result) count(calls []call, answered int) {
	r.otherCalls = map[string]int{}
	byChat := map[int64][]time.Time{}
	var all []time.Time
	for _, c := range calls {
		if c.status != 200 {
			r.refused++
		}
		switch c.method {
		case "sendMessage":
			r.sends++
		case "editMessageText":
			r.edits++
		default:
			r.otherCalls[c.method]++
			continue
		}
		byChat[c.chat] = append(byChat[c.chat], c.at)
		all = append(all, c.at)
	}
	r.minGap = -1
	for _, at := range byChat {
		sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
		for i := 1; i < len(at); i++ {
			gap := at[i].Sub(at[i-1])
			if r.minGap < 0 || gap < r.minGap {
				r.minGap = gap
			}
			if gap < perChat {
				r.underPace++
			}
		}
	}
	r.perBotMax = inAnySecond(all)
	if answered > 0 {
		r.perReply = float64(r.sends+r.edits) / float64(answered)
		r.editsPerReply = float64(r.edits) / float64(answered)
	}
}

// inAnySecond is the most of these times within one second.
func inAnySecond(at []time.Time) int {
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	most := 0
	for i, j := 0, 0; j < len(at); j++ {
		for at[j].Sub(at[i]) >= time.Second {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

func printTable(w io.Writer, c config, res []result) {
	fmt.Fprintf(w, "%d private chats × %d user messages sent at once = %d; each reply streamed in %d chunks %v apart, then its final\n\n",
		c.chats, c.each, c.chats*c.each, c.chunks, c.gap)
	row := func(name string, f func(r result) string) {
		cells := []string{name}
		for _, r := range res {
			cells = append(cells, f(r))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	head := []string{"per side"}
	for _, r := range res {
		head = append(head, r.side)
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	answered := func(r result) int { return r.shownOnce + r.twice + r.outOfOrder }
	row("replies shown once, in order (of sent)", func(r result) string { return fmt.Sprintf("%d of %d", r.shownOnce, r.want) })
	row("replies shown twice / out of order / missing", func(r result) string {
		return fmt.Sprintf("%d / %d / %d", r.twice, r.outOfOrder, r.missing)
	})
	row("other bot messages left in the chats", func(r result) string { return fmt.Sprint(r.others) })
	row("CPU per answered message (ms)", func(r result) string {
		if answered(r) == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", float64(r.cpu.Microseconds())/1000/float64(answered(r)))
	})
	row("CPU total (s) over the run", func(r result) string { return fmt.Sprintf("%.2f", r.cpu.Seconds()) })
	row("memory per chat, VmHWM − idle VmRSS (KiB)", func(r result) string {
		return fmt.Sprintf("%.1f", float64(r.end.hwm-r.idle.rss)/1024/float64(c.chats))
	})
	row("memory per chat, VmRSS − idle VmRSS (KiB)", func(r result) string {
		return fmt.Sprintf("%.1f", float64(r.end.rss-r.idle.rss)/1024/float64(c.chats))
	})
	row("idle VmRSS (MiB)", func(r result) string { return fmt.Sprintf("%.1f", float64(r.idle.rss)/(1<<20)) })
	row("sends + edits per reply", func(r result) string { return fmt.Sprintf("%.2f", r.perReply) })
	row("edits per reply", func(r result) string { return fmt.Sprintf("%.2f", r.editsPerReply) })
	row("shortest gap between sends/edits to a chat (ms)", func(r result) string { return fmt.Sprint(r.minGap.Milliseconds()) })
	row("sends/edits under 1 s after the chat's previous", func(r result) string { return fmt.Sprint(r.underPace) })
	row("most sends + edits by the bot in 1 s", func(r result) string { return fmt.Sprint(r.perBotMax) })
	row("other calls", func(r result) string {
		var ms []string
		for m, n := range r.otherCalls {
			ms = append(ms, fmt.Sprintf("%s %d", m, n))
		}
		sort.Strings(ms)
		if len(ms) == 0 {
			return "none"
		}
		return strings.Join(ms, ", ")
	})
	row("calls refused (not 200)", func(r result) string { return fmt.Sprint(r.refused) })
	row("first message to last reply shown (s)", func(r result) string { return fmt.Sprintf("%.1f", r.elapsed.Seconds()) })
	row("load average before / after", func(r result) string { return r.load[0] + " / " + r.load[1] })
}
