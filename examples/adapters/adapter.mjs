// A correct ORS client in JavaScript (Node.js 18+, no dependencies), speaking orsbench's adapter contract.
//
//     orsbench check-client --client-cmd "node examples/adapters/adapter.mjs"
//
// Why it exists: `orsbench check-client` grades a client in any language, and this file shows it on
// one that is not Python. It is the JavaScript twin of orsbench/clientcheck/reference.py and passes
// every case: open a session (/create_session, then /create with env_name, the task and X-Secrets),
// read the prompt, make the script's calls in order — resuming a cut stream by its task_id, waiting as
// long as Retry-After says before retrying a 429/502/503/504, never retrying another 4xx — stop at
// `finished` or at a failure (an `ok: false` refusal is reported and the episode goes on), delete the
// session, and append one JSON line per call to ORSBENCH_OUT. Exit status 0, or 1 when the episode
// ended on a failure. Ended with SIGTERM mid-episode, it deletes its session and exits 143 (Node's own
// SIGTERM would just die, leaving the session open: docs/protocol.md §13.17). The rules are
// docs/protocol.md §12; the contract is docs/clients.md.
//
// Each rule is one small method of `Adapter`, so a test can break exactly one of them in a subclass:
//     import { Adapter, main } from "./adapter.mjs";
//     class NoDelete extends Adapter { async close() {} }
//     process.exitCode = await main(NoDelete);

import { appendFileSync, readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const RETRYABLE = new Set([429, 502, 503, 504]);
const RETRY_DEFAULT_S = 1.0;
const ATTEMPTS = 5;
const RESUMES = 3; // resumes of one cut stream before giving up on it
const READ_TIMEOUT_MS = 30_000; // silence on a stream before it counts as cut (the openreward SDK's figure)
const REQUIRED = ["ORSBENCH_URL", "ORSBENCH_ENV", "ORSBENCH_SPLIT", "ORSBENCH_INDEX", "ORSBENCH_SCRIPT", "ORSBENCH_OUT"];

/** A failure the client reports to its caller (written as {"error": ...}). */
export class ClientError extends Error {}

/** An `ok: false` answer: the tool refused this input; the session is fine and the episode goes on. */
export class Refused extends ClientError {
  constructor(message, reason) {
    super(message);
    this.reason = reason;
  }
}

// -- the one SSE parser of this file: WHATWG text/event-stream rules ----------------------------------

/** Parse a whole stream: dispatched events only (a block not ended by an empty line is not an event). */
export function parseSSE(text) {
  const events = [];
  let block = { event: "message", data: [], hasData: false };
  for (const line of text.split(/\r\n|\r|\n/).slice(0, -1)) { // the last piece has no terminator yet
    if (line === "") {
      if (block.hasData) events.push({ event: block.event, data: block.data.join("\n") });
      block = { event: "message", data: [], hasData: false };
      continue;
    }
    if (line.startsWith(":")) continue; // a comment: ": ping" keep-alives
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1); // exactly one space, never more
    if (field === "event") block.event = value;
    else if (field === "data") {
      block.data.push(value);
      block.hasData = true;
    }
  }
  return events;
}

const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

export class Adapter {
  constructor(env = process.env) {
    this.url = env.ORSBENCH_URL.replace(/\/+$/, "");
    this.envName = env.ORSBENCH_ENV;
    this.split = env.ORSBENCH_SPLIT;
    this.index = Number.parseInt(env.ORSBENCH_INDEX, 10);
    this.calls = JSON.parse(readFileSync(env.ORSBENCH_SCRIPT, "utf8")).calls;
    this.outPath = env.ORSBENCH_OUT;
    this.secrets = JSON.parse(env.ORSBENCH_SECRETS || "{}");
    this.sid = null;
    this.failed = false; // the episode ended on a reported failure: exit status 1
    this.reward = null; // the last non-null reward: the episode's score in an aggregate over episodes
  }

  // -- the contract's output --------------------------------------------------------------------
  write(line) {
    appendFileSync(this.outPath, JSON.stringify(line) + "\n", "utf8");
  }

  // -- HTTP with the retry rules ----------------------------------------------------------------
  headers(extra = {}) {
    return { ...(this.sid ? { "X-Session-ID": this.sid } : {}), ...extra };
  }

  retryDelay(response) {
    const seconds = Number.parseFloat(response.headers.get("retry-after") ?? "");
    return Number.isFinite(seconds) ? Math.max(0, seconds) : RETRY_DEFAULT_S;
  }

  shouldRetry(response) {
    return RETRYABLE.has(response.status);
  }

  /** One request, retried on a retryable status after the wait the server asked for; its body text. */
  async request(method, path, { json, headers = {} } = {}) {
    let response;
    let text = "";
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const init = { method, headers: this.headers(headers), signal: AbortSignal.timeout(READ_TIMEOUT_MS) };
      if (json !== undefined) {
        init.body = JSON.stringify(json);
        init.headers["Content-Type"] = "application/json";
      }
      response = await fetch(this.url + path, init);
      text = await response.text();
      if (response.status < 400) return text;
      if (attempt + 1 < ATTEMPTS && this.shouldRetry(response)) {
        await sleep(this.retryDelay(response));
        continue;
      }
      break;
    }
    throw new ClientError(`${method} ${path} answered ${response.status}: ${text.slice(0, 300)}`);
  }

  // -- the session ------------------------------------------------------------------------------
  createBody() {
    return { env_name: this.envName, split: this.split, index: this.index };
  }

  secretsHeader() {
    const names = Object.keys(this.secrets);
    if (names.length === 0) return {};
    const wrapped = Object.fromEntries(names.map((name) => [name, { value: this.secrets[name] }]));
    return { "X-Secrets": Buffer.from(JSON.stringify(wrapped), "utf8").toString("base64") };
  }

  async open() {
    const created = parseSSE(await this.request("POST", "/create_session"));
    const sid = created.find((e) => e.event === "task_id")?.data;
    if (!sid) throw new ClientError("/create_session sent no session id");
    this.sid = sid;
    await this.request("POST", "/create", { json: this.createBody(), headers: this.secretsHeader() });
    await this.request("GET", `/${this.envName}/prompt`);
  }

  async close() {
    if (this.sid === null) return;
    try {
      await this.request("POST", "/delete");
    } catch {
      // a session the server already lost: nothing left to free
    }
  }

  // -- tool calls -------------------------------------------------------------------------------
  /** POST one /call body; the events that arrived (a cut connection keeps what came before it). */
  async stream(body) {
    const path = `/${this.envName}/call`;
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const abort = new AbortController();
      let text = "";
      try {
        const response = await fetch(this.url + path, {
          method: "POST",
          headers: this.headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
          body: JSON.stringify(body),
          signal: abort.signal,
        });
        if (response.status >= 400) {
          const detail = await response.text();
          if (attempt + 1 < ATTEMPTS && this.shouldRetry(response)) {
            await sleep(this.retryDelay(response));
            continue;
          }
          throw new ClientError(`/call answered ${response.status}: ${detail.slice(0, 300)}`);
        }
        const reader = response.body.getReader();
        const decoder = new TextDecoder("utf-8");
        for (;;) {
          const silence = setTimeout(() => abort.abort(), READ_TIMEOUT_MS);
          let chunk;
          try {
            chunk = await reader.read();
          } finally {
            clearTimeout(silence);
          }
          if (chunk.done) break;
          text += decoder.decode(chunk.value, { stream: true });
        }
        text += decoder.decode();
      } catch (error) {
        if (error instanceof ClientError) throw error;
        // cut (reset, closed early, silent too long): what arrived is parsed; the caller resumes by task_id
      }
      return parseSSE(text);
    }
    throw new ClientError("/call kept answering retryable errors");
  }

  /** chunk data + end data, exactly as sent; null when no end came. */
  assemble(events) {
    const parts = [];
    for (const event of events) {
      if (event.event === "chunk") parts.push(event.data);
      else if (event.event === "end") {
        parts.push(event.data);
        return parts.join("");
      }
    }
    return null;
  }

  static terminal(events) {
    return events.some((e) => e.event === "end" || e.event === "error");
  }

  /** A stream cut after its task_id: resume the task (the tool already ran; never run it again). */
  async afterCut(tool, input, taskId) {
    return this.stream({ name: tool, input, task_id: taskId });
  }

  /** One tool call: the output of an `ok: true` answer, or a ClientError. */
  async call(tool, input) {
    let events = await this.stream({ name: tool, input });
    const taskId = events.find((e) => e.event === "task_id")?.data;
    for (let i = 0; i < RESUMES; i++) {
      if (Adapter.terminal(events) || !taskId) break;
      events = await this.afterCut(tool, input, taskId);
    }
    const error = events.find((e) => e.event === "error");
    if (error) throw new ClientError(`${tool} failed: ${error.data}`);
    const text = this.assemble(events);
    if (text === null) {
      throw new ClientError(`${tool}: the stream ended without a result${taskId ? "" : " (cut before its task_id)"}`);
    }
    let result;
    try {
      result = JSON.parse(text);
    } catch {
      throw new ClientError(`${tool}: the result is not JSON`);
    }
    if (result === null || typeof result !== "object" || Array.isArray(result)) {
      throw new ClientError(`${tool}: the result is not a JSON object`);
    }
    return this.unwrap(tool, result);
  }

  unwrap(tool, result) {
    if (result.ok !== true) throw new Refused(`${tool} refused (${result.reason}): ${result.error}`, result.reason ?? null);
    const output = result.output;
    if (output === null || typeof output !== "object" || Array.isArray(output)) {
      throw new ClientError(`${tool}: ok:true without an output object`);
    }
    this.validate(output);
    return output;
  }

  /** Reward: a finite number or null (a JSON boolean is not one); finished: a boolean. */
  validate(output) {
    const reward = output.reward ?? null;
    if (reward !== null && (typeof reward !== "number" || !Number.isFinite(reward))) {
      throw new ClientError(`the reward ${JSON.stringify(reward)} is not a number`);
    }
    if (typeof (output.finished ?? false) !== "boolean") {
      throw new ClientError(`finished ${JSON.stringify(output.finished)} is not a boolean`);
    }
  }

  static textOf(output) {
    return (output.blocks ?? [])
      .filter((b) => b && typeof b === "object" && b.type === "text")
      .map((b) => b.text ?? "")
      .join("");
  }

  line(tool, output) {
    return { tool, text: Adapter.textOf(output), reward: output.reward ?? null, finished: Boolean(output.finished) };
  }

  /** Write a call's failure; whether to stop the episode (an `ok: false` refusal lets it go on). */
  reportFailure(tool, error) {
    this.write({ tool, error: String(error.message ?? error), ...(error instanceof Refused ? { reason: error.reason } : {}) });
    this.failed = true;
    return !(error instanceof Refused);
  }

  shouldStop(output) {
    return Boolean(output.finished);
  }

  // -- the episode ------------------------------------------------------------------------------
  /** SIGTERM (a scheduler preempting it, `timeout`): delete the open session, then exit 143. */
  onSigterm() {
    process.once("SIGTERM", async () => {
      await this.close();
      process.exit(143);
    });
  }

  async play() {
    this.onSigterm();
    try {
      await this.open();
    } catch (error) {
      this.write({ error: `could not open the session: ${error.message ?? error}` });
      await this.close();
      return 1;
    }
    try {
      for (const step of this.calls) {
        let output;
        try {
          output = await this.call(step.tool, step.input);
        } catch (error) {
          if (this.reportFailure(step.tool, error)) break;
          continue;
        }
        this.write(this.line(step.tool, output));
        this.failed = false;
        if (output.reward !== undefined && output.reward !== null) this.reward = output.reward;
        if (this.shouldStop(output)) break;
      }
    } finally {
      await this.close();
    }
    return this.failed ? 1 : 0;
  }
}

export async function main(AdapterClass = Adapter) {
  const missing = REQUIRED.filter((name) => !(name in process.env));
  if (missing.length > 0) {
    console.error(`adapter.mjs: run me under \`orsbench check-client --client-cmd ...\`: ${missing.join(", ")} not set`);
    return 2;
  }
  // ORSBENCH_RUNS: the script played that many times in this one process, each run an Adapter of its own
  // (its own session and episode state: nothing of one run is carried into the next, docs/protocol.md §13.16).
  // ORSBENCH_EPISODES: each run plays tasks INDEX .. INDEX+N-1, going on after a failed one, then reports its mean
  // over all N, a failed episode as 0 (§13.15).
  const count = (name) => Math.max(1, Number.parseInt(process.env[name] ?? "1", 10) || 1);
  const runs = count("ORSBENCH_RUNS");
  const episodes = count("ORSBENCH_EPISODES");
  const first = Number.parseInt(process.env.ORSBENCH_INDEX, 10);
  let code = 0;
  for (let run = 0; run < runs; run++) {
    let total = 0;
    let client;
    for (let number = 0; number < episodes; number++) {
      client = new AdapterClass({ ...process.env, ORSBENCH_INDEX: String(first + number) });
      const played = await client.play();
      code = Math.max(code, played);
      total += played ? 0 : Number(client.reward ?? 0);
    }
    if (episodes > 1) client.write({ aggregate_reward: total / episodes, episodes });
  }
  return code;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main();
}
