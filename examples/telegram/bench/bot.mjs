// The peer side of the Telegram benchmark (see main.go): a Chat SDK bot
// (chat + @chat-adapter/telegram, versions pinned in ../package.json) that
// answers every private message with the reply the Connector's side gets
// from its simulated xAgent — the same text, in the same chunks, the same
// gap apart — streamed with the adapter's own post-and-edit.
//
// Environment (set by main.go): BENCH_API (the Bot API base URL), BENCH_TOKEN,
// BENCH_CHUNKS, BENCH_GAP_MS, BENCH_EDIT_MS (the adapter's edit interval),
// BENCH_CONCURRENCY ("serial", or a Chat SDK concurrency strategy),
// BENCH_PLACEHOLDER ("default": the SDK's "..." placeholder; else none).
// It prints "ready" once polling runs and stops on SIGTERM.
import { Chat, ConsoleLogger } from "chat";
import { createTelegramAdapter } from "@chat-adapter/telegram";
import { createMemoryState } from "@chat-adapter/state-memory";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`bot.mjs: ${name} is not set`);
  return v;
};
const chunks = Number(env("BENCH_CHUNKS"));
const gapMs = Number(env("BENCH_GAP_MS"));
const concurrency = env("BENCH_CONCURRENCY");

// reply and pieces must match main.go's: the harness checks the text each
// chat shows against them.
const reply = (userText) => `answer to ${userText} lorem ipsum dolor sit amet consectetur adipiscing elit`;
const pieces = (text, n) => {
  const out = [];
  for (let i = 0; i < n; i++) out.push(text.slice(Math.floor((i * text.length) / n), Math.floor(((i + 1) * text.length) / n)));
  return out;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function* stream(text) {
  const ps = pieces(text, chunks);
  for (let i = 0; i < ps.length; i++) {
    if (i > 0) await sleep(gapMs);
    yield ps[i];
  }
}

const logger = new ConsoleLogger("warn");
const telegram = createTelegramAdapter({
  botToken: env("BENCH_TOKEN"),
  apiUrl: env("BENCH_API"),
  mode: "polling",
  userName: "TestNameBot",
  // The Connector's pace: one send or edit a second per chat.
  streamingEditIntervalMs: Number(env("BENCH_EDIT_MS")),
  longPolling: { timeout: 25, deleteWebhook: false },
  logger,
});
const bot = new Chat({
  userName: "TestNameBot",
  adapters: { telegram },
  state: createMemoryState(),
  logger,
  // "serial" (the harness's default) is the one setting that answers
  // every message in order: at most one handler a chat at a time, the
  // others waiting in arrival order. Drop (the SDK's default) loses the
  // messages that come while a reply streams, queue and burst answer the
  // latest of them, concurrent answers all at once.
  concurrency: concurrency === "serial" ? { strategy: "concurrent", maxConcurrent: 1 } : concurrency,
  // No "..." placeholder (unless BENCH_PLACEHOLDER=default): the first
  // post is the first chunk, as the Connector's. It also makes that post
  // the one that finds out whether the server has Bot API 10.1's rich
  // messages (sendRichMessage: 404 here, so plain messages from then on);
  // with the placeholder the first edit finds out, with no text, and fails
  // on a server without them.
  ...(process.env.BENCH_PLACEHOLDER === "default" ? {} : { fallbackStreamingPlaceholderText: null }),
});
bot.onDirectMessage(async (thread, message) => {
  await thread.post(stream(reply(message.text)));
});

await bot.initialize();
console.log("ready");
process.on("SIGTERM", async () => {
  await telegram.stopPolling?.();
  process.exit(0);
});
