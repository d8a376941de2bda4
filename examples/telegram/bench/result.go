//go:build unix

package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/xagentkit/imv2/examples/telegram/internal/botapitest"
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
func (r *result) count(calls []botapitest.Call, answered int) {
	r.otherCalls = map[string]int{}
	byChat := map[int64][]time.Time{}
	var all []time.Time
	for _, c := range calls {
		if c.Status != 200 {
			r.refused++
		}
		switch c.Method {
		case "sendMessage":
			r.sends++
		case "editMessageText":
			r.edits++
		default:
			r.otherCalls[c.Method]++
			continue
		}
		byChat[c.Chat] = append(byChat[c.Chat], c.At)
		all = append(all, c.At)
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
	head := []string{"per side"}
	for _, r := range res {
		head = append(head, r.side)
	}
	ratio := len(res) == 2 // a last column: the first side's figure ÷ the second's
	if ratio {
		head = append(head, "first ÷ second")
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	text := func(name string, f func(r result) string) {
		cells := []string{name}
		for _, r := range res {
			cells = append(cells, f(r))
		}
		if ratio {
			cells = append(cells, "")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	num := func(name, format string, f func(r result) float64) {
		cells := []string{name}
		for _, r := range res {
			cell := "n/a" // NaN: nothing to divide by
			if v := f(r); !math.IsNaN(v) {
				cell = fmt.Sprintf(format, v)
			}
			cells = append(cells, cell)
		}
		if ratio {
			cell := "n/a"
			if a, b := f(res[0]), f(res[1]); b != 0 && !math.IsNaN(a) && !math.IsNaN(b) {
				cell = fmt.Sprintf("%.2f×", a/b)
			}
			cells = append(cells, cell)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	answered := func(r result) int { return r.shownOnce + r.twice + r.outOfOrder }
	text("replies shown once, in order (of sent)", func(r result) string { return fmt.Sprintf("%d of %d", r.shownOnce, r.want) })
	text("replies shown twice / out of order / missing", func(r result) string {
		return fmt.Sprintf("%d / %d / %d", r.twice, r.outOfOrder, r.missing)
	})
	text("other bot messages left in the chats", func(r result) string { return fmt.Sprint(r.others) })
	num("CPU per answered message (ms)", "%.2f", func(r result) float64 {
		if answered(r) == 0 {
			return math.NaN()
		}
		return float64(r.cpu.Microseconds()) / 1000 / float64(answered(r))
	})
	num("CPU over the run (s)", "%.2f", func(r result) float64 { return r.cpu.Seconds() })
	num("memory per chat, VmHWM − idle VmRSS (KiB)", "%.1f", func(r result) float64 {
		return float64(r.end.hwm-r.idle.rss) / 1024 / float64(c.chats)
	})
	num("memory per chat, VmRSS − idle VmRSS (KiB)", "%.1f", func(r result) float64 {
		return float64(r.end.rss-r.idle.rss) / 1024 / float64(c.chats)
	})
	num("idle VmRSS (MiB)", "%.1f", func(r result) float64 { return float64(r.idle.rss) / (1 << 20) })
	num("sends + edits per reply", "%.2f", func(r result) float64 { return r.perReply })
	num("edits per reply", "%.2f", func(r result) float64 { return r.editsPerReply })
	num("shortest gap between sends/edits to a chat (ms)", "%.0f", func(r result) float64 { return float64(r.minGap.Milliseconds()) })
	num("sends/edits under 1 s after the chat's previous", "%.0f", func(r result) float64 { return float64(r.underPace) })
	num("most sends + edits by the bot in 1 s", "%.0f", func(r result) float64 { return float64(r.perBotMax) })
	text("other calls", func(r result) string {
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
	num("calls refused (not 200)", "%.0f", func(r result) float64 { return float64(r.refused) })
	num("first message to last reply shown (s)", "%.1f", func(r result) float64 { return r.elapsed.Seconds() })
	text("load average before / after", func(r result) string { return r.load[0] + " / " + r.load[1] })
}
