/**
 * clawmd for a TypeScript container host: compose a group's memory before each spawn and get
 * the binds its container needs in one call (`prepareSpawn`: in the host's own process through
 * clawmd's Node addon, `clawmd.node`, as napi-rs tools ship, or over a long-lived `clawmd serve`
 * process, as esbuild runs its service, when there is no addon), or with a process per call
 * (`composeBeforeSpawn`, `mounts`); check groups (`checkGroup`), migrate legacy groups once at
 * start-up (`migrateOnce`).
 *
 * It runs the clawmd binary (node:child_process, no dependencies) with `--format json` and
 * returns its report; the binary is `options.binary`, else `$CLAWMD`, else the one the npm
 * package for this platform brings (`@clawmd/linux-x64-gnu`, …: an optional dependency of
 * `clawmd`, installed by npm only where it runs; see `resolveBinary`), which also brings the
 * addon (`resolveAddon`). It returns the report, typed by ./generated/ — generated from `clawmd schema …` by
 * scripts/gen-typescript, so the types are the Rust types that print the reports. Every
 * failure is a `ClawmdError` whose `code` is the report's own code (`bad-config`,
 * `not-delivered`, `lock-timeout`, …) or one of the runner's (`spawn-failed`, `timeout`,
 * `bad-output`, `addon-failed`), with the report's message and the file concerned. See README.md.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";

import type { CheckReport, GroupCheck } from "./generated/check-report.js";
import type {
  Code,
  ComposeReport,
  DeliveredReport,
  Delivery,
  GroupReport,
  Provider,
  Target,
} from "./generated/compose-report.js";
import type { MigrateReport } from "./generated/migrate-report.js";
import type { Bind, MountsReport } from "./generated/mounts.js";
import type { RunFailure } from "./generated/run-failure.js";
import type { ServeAnswer } from "./generated/serve-answer.js";
import type { ServeRequest } from "./generated/serve-request.js";
import type { WatchLine } from "./generated/watch-event.js";

export type {
  Bind,
  CheckReport,
  Code,
  ComposeReport,
  DeliveredReport,
  Delivery,
  GroupCheck,
  GroupReport,
  MigrateReport,
  MountsReport,
  Provider,
  RunFailure,
  ServeAnswer,
  ServeRequest,
  Target,
  WatchLine,
};

/** Each report's `$schema`: the `$id` of the schema `clawmd schema KIND` prints. */
export const SCHEMA: {
  readonly compose: ComposeReport["$schema"];
  readonly check: CheckReport["$schema"];
  readonly migrate: MigrateReport["$schema"];
  readonly failure: RunFailure["$schema"];
  readonly serve: ServeAnswer["$schema"];
} = {
  compose: "urn:clawmd:schema:compose-report:1",
  check: "urn:clawmd:schema:check-report:1",
  migrate: "urn:clawmd:schema:migrate-report:1",
  failure: "urn:clawmd:schema:run-failure:1",
  serve: "urn:clawmd:schema:serve-answer:1",
};

/** How to run clawmd. */
export interface ClawmdOptions {
  /** The clawmd binary (default: `$CLAWMD`, else the platform package's; see `resolveBinary`). */
  binary?: string;
  /** The deployment root (`--root`; default: `$CLAWMD_ROOT`, else the current directory). */
  root?: string;
  /** Kill clawmd after this many milliseconds (default 30 000). */
  timeoutMs?: number;
  /** clawmd's environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
}

/** compose's choices; left out, clawmd takes them from `clawmd.json` and `container.json`. */
export interface ComposeOptions extends ClawmdOptions {
  delivery?: Delivery;
  provider?: Provider;
  approveExternal?: boolean;
  /** How long to wait for another run holding the group's lock (`--lock-timeout`). */
  lockTimeoutSecs?: number;
  /** Resolve even when not everything composed reaches the agent (default: reject, `not-delivered`). */
  allowIncomplete?: boolean;
  /**
   * The group's config, when the runner keeps it outside `container.json` (nanoclaw keeps
   * `cli_scope` in its database row): handed to clawmd on standard input (`--config -`) and read
   * instead of `container.json`. With `"groupConfig": "handed"` in `clawmd.json`, clawmd keeps it
   * for `check` and `render`.
   */
  config?: object;
}

/** mounts' choices; left out, clawmd takes them from `clawmd.json` and `container.json`. */
export interface MountsOptions extends ClawmdOptions {
  delivery?: Delivery;
  provider?: Provider;
}

/** check's choices. */
export interface CheckOptions extends ClawmdOptions {
  delivery?: Delivery;
  approveExternal?: boolean;
}

/** Failures of the runner itself, next to clawmd's own codes. */
export type RunnerCode =
  /** No binary to run: no `options.binary`, no `$CLAWMD`, and no platform package for this platform installed. */
  | "no-binary"
  /** The binary could not be started (not found, not executable). */
  | "spawn-failed"
  /** clawmd did not finish within `timeoutMs` and was killed. */
  | "timeout"
  /** clawmd printed no report, or not the one asked for (a usage error, another version). */
  | "bad-output"
  /** The `clawmd serve` process ended (killed, crashed) before it answered. */
  | "service-exited"
  /** The addon named (`options.addon`, `$CLAWMD_ADDON`, or `way: "addon"`) could not be loaded, or refused the service's options (a `CLAWMD_*` variable it cannot read). */
  | "addon-failed";

/** A group that did not compose (or not completely), a run that failed, or clawmd not running. */
export class ClawmdError extends Error {
  override readonly name = "ClawmdError";
  constructor(
    message: string,
    /** The report's code (`bad-config`, `not-delivered`, `run-failed`, …) or the runner's. */
    readonly code: Code | RunnerCode,
    /** The file concerned, when there is one (`error.file` of the report; for `not-delivered`, the entry point relative to the group folder). */
    readonly file: string | null,
    /** The group, when the error is about one. */
    readonly group: string | null,
    /** The report clawmd printed, when it printed one. */
    readonly report: ComposeReport | CheckReport | MigrateReport | RunFailure | ServeAnswer | null,
    /** What clawmd wrote on stderr. */
    readonly stderr: string,
  ) {
    super(message);
  }
}

/** A group composed: its entry in the report, and the whole report. */
export interface Composed {
  /** This group's entry: what changed, warnings, `target`, `delivered`. */
  group: GroupReport;
  /** `sha256:…` of the memory a new session of the agent loads (its own `CLAUDE.local.md` included). */
  memoryDigest: string;
  /** `sha256:…` of what a container started now pins (its file binds' content): keep it with the container; restart the container when a later compose reports another one. It never moves with the agent's own memory, nor with what a running container sees at its next session (the managed folder, `.claude-fragments`, `/app/skills`). */
  spawnDigest: string;
  /** What the group is composed as: backend, delivery mode, entry point (`CLAUDE.md`, `AGENTS.md`, `GEMINI.md`). */
  target: Target;
  /** Whether everything composed reaches the agent (always `complete` unless `allowIncomplete`). */
  delivered: DeliveredReport;
  /** Whether anything was written (false: a no-op). */
  changed: boolean;
  report: ComposeReport;
}

/** `clawmd compose GROUP --format json`, before spawning the group's container. */
export async function composeBeforeSpawn(group: string, options: ComposeOptions = {}): Promise<Composed> {
  const args = composeArgs(group, options);
  return interpretCompose(group, options, await run(args, options, configInput(options)));
}

/** `composeBeforeSpawn` for a synchronous spawn path (blocks the event loop while clawmd runs). */
export function composeBeforeSpawnSync(group: string, options: ComposeOptions = {}): Composed {
  const args = composeArgs(group, options);
  return interpretCompose(group, options, runSync(args, options, configInput(options)));
}

/**
 * `clawmd mounts GROUP --format json`: the binds to make for the group's container, in the
 * order to apply them (`host` shown at `container`, read-only or not). Apply them as they are
 * and add only the runner's own mounts, none of them over these.
 */
export async function mounts(group: string, options: MountsOptions = {}): Promise<Bind[]> {
  const args = mountsArgs(group, options);
  return parseMounts(await run(args, options), args);
}

/** `mounts` for a synchronous spawn path (blocks the event loop while clawmd runs). */
export function mountsSync(group: string, options: MountsOptions = {}): Bind[] {
  const args = mountsArgs(group, options);
  return parseMounts(runSync(args, options), args);
}

/** `clawmd check GROUP --format json`: the findings (the report's `ok` is false when one is an error). */
export async function checkGroup(group: string, options: CheckOptions = {}): Promise<CheckReport> {
  const args = ["check", group, "--format", "json"];
  if (options.delivery !== undefined) args.push("--delivery", options.delivery);
  if (options.approveExternal === true) args.push("--approve-external");
  return parse(await run(args, options), SCHEMA.check, args) as CheckReport;
}

/** `clawmd migrate --format json`, once at host start-up (a second run does nothing). */
export async function migrateOnce(options: ClawmdOptions = {}): Promise<MigrateReport> {
  const args = ["migrate", "--format", "json"];
  const outcome = await run(args, options);
  const report = parse(outcome, SCHEMA.migrate, args) as MigrateReport;
  const failed = report.groups.find((g) => g.error !== null);
  if (failed?.error) {
    throw new ClawmdError(
      `clawmd migrate: ${failed.group}: ${failed.error.code}: ${failed.error.message}`,
      failed.error.code,
      failed.error.file ?? null,
      failed.group,
      report,
      outcome.stderr,
    );
  }
  return report;
}

function mountsArgs(group: string, options: MountsOptions): string[] {
  const args = ["mounts", group, "--format", "json"];
  if (options.delivery !== undefined) args.push("--delivery", options.delivery);
  if (options.provider !== undefined) args.push("--provider", options.provider);
  return args;
}

/** The binds `clawmd mounts` printed (a bare array, see `clawmd schema mounts`), or a `ClawmdError`. */
function parseMounts(outcome: Outcome, args: string[]): MountsReport {
  const doc = document(outcome, args);
  const what = `clawmd ${args.join(" ")}`;
  const isBind = (bind: unknown): bind is Bind =>
    typeof bind === "object" &&
    bind !== null &&
    typeof (bind as Bind).host === "string" &&
    typeof (bind as Bind).container === "string" &&
    typeof (bind as Bind).readonly === "boolean";
  if (!Array.isArray(doc) || !doc.every(isBind)) {
    throw new ClawmdError(
      `${what} printed no array of binds (a clawmd without \`mounts\`?)`,
      "bad-output",
      null,
      null,
      null,
      outcome.stderr,
    );
  }
  return doc;
}

function composeArgs(group: string, options: ComposeOptions): string[] {
  const args = ["compose", group, "--format", "json"];
  if (options.delivery !== undefined) args.push("--delivery", options.delivery);
  if (options.provider !== undefined) args.push("--provider", options.provider);
  if (options.approveExternal === true) args.push("--approve-external");
  if (options.lockTimeoutSecs !== undefined) args.push("--lock-timeout", String(options.lockTimeoutSecs));
  if (options.config !== undefined) args.push("--config", "-");
  return args;
}

/** What compose reads on standard input: the handed config, if any. */
function configInput(options: ComposeOptions): string | undefined {
  return options.config === undefined ? undefined : JSON.stringify(options.config);
}

function interpretCompose(group: string, options: ComposeOptions, outcome: Outcome): Composed {
  const args = composeArgs(group, options);
  const report = parse(outcome, SCHEMA.compose, args) as ComposeReport;
  return interpretReport(group, options, report, outcome.stderr);
}

/** The group's entry of a compose report, or a `ClawmdError` when it did not compose (or not completely). */
function interpretReport(
  group: string,
  options: Pick<ComposeOptions, "allowIncomplete">,
  report: ComposeReport,
  stderr: string,
): Composed {
  const entry = report.groups.find((g) => g.group === group);
  const fail = (message: string, code: Code | RunnerCode, file: string | null): never => {
    throw new ClawmdError(`clawmd compose ${group}: ${message}`, code, file, group, report, stderr);
  };
  if (entry === undefined) {
    return fail("the report has no entry for the group", "bad-output", null);
  }
  if (entry.error !== null) {
    return fail(`${entry.error.code}: ${entry.error.message}`, entry.error.code, entry.error.file ?? null);
  }
  const { memory_digest: memoryDigest, spawn_digest: spawnDigest, target, delivered } = entry;
  if (memoryDigest === null || spawnDigest === null || target === null || delivered === null) {
    return fail("the report has no memory_digest, spawn_digest, target or delivered verdict", "bad-output", null);
  }
  if (!delivered.complete && options.allowIncomplete !== true) {
    return fail(
      `not-delivered: ${target.file} does not bring the agent ${delivered.missing.join(", ")}` +
        (delivered.reasons.length > 0 ? ` (${delivered.reasons.join("; ")})` : ""),
      "not-delivered",
      target.file,
    );
  }
  return { group: entry, memoryDigest, spawnDigest, target, delivered, changed: entry.status === "changed", report };
}

/** What running clawmd gave. */
interface Outcome {
  binary: string;
  stdout: string;
  stderr: string;
  /** Set when the binary could not be started. */
  spawnError: NodeJS.ErrnoException | null;
  timedOut: boolean;
  timeoutMs: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_OUTPUT = 256 * 1024 * 1024;

/**
 * The npm packages that bring the binary, by `${process.platform}-${process.arch}`. Each is an
 * optional dependency of `clawmd` whose `os`, `cpu` and `libc` fields make npm install it only
 * on the platform it runs on (as esbuild and Biome ship theirs).
 */
export const PLATFORM_PACKAGES: Readonly<Record<string, readonly string[]>> = {
  "linux-x64": ["@clawmd/linux-x64-gnu"],
  "linux-arm64": ["@clawmd/linux-arm64-gnu"],
};

/**
 * The clawmd binary to run: `options.binary`, else `$CLAWMD` (of `options.env`, default this
 * process's environment), else `bin/clawmd` of the platform package installed beside this one.
 * Throws a `ClawmdError` (`no-binary`) naming the platform when none of them gives one.
 */
export function resolveBinary(options: Pick<ClawmdOptions, "binary" | "env"> = {}): string {
  if (options.binary !== undefined) return options.binary;
  const fromEnv = (options.env ?? process.env)["CLAWMD"];
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  const platform = `${process.platform}-${process.arch}`;
  const candidates = PLATFORM_PACKAGES[platform] ?? [];
  const require = createRequire(import.meta.url);
  for (const name of candidates) {
    try {
      return require.resolve(`${name}/bin/clawmd`);
    } catch {
      // not installed here: try the next one
    }
  }
  const libc = process.platform === "linux" ? linuxLibc() : null;
  const named = `${platform}${libc !== null ? ` (${libc})` : ""}`;
  const packages = Object.values(PLATFORM_PACKAGES).flat().join(", ");
  let message: string;
  if (candidates.length === 0) {
    // clawmd itself is Linux-only (syncfs, O_PATH handles): no build to point to elsewhere.
    message =
      `no clawmd binary for this platform, ${named}: clawmd runs only on Linux, where the clawmd ` +
      `npm package brings one for ${Object.keys(PLATFORM_PACKAGES).join(", ")} (${packages}): ` +
      "run the host on Linux, or set CLAWMD or pass options.binary to a clawmd binary that runs here";
  } else if (libc !== null && !libc.startsWith("glibc")) {
    message =
      `no clawmd binary for this platform, ${named}: ${candidates.join(" or ")} is built for ` +
      "glibc and npm installs it only there: build clawmd on this machine (`cargo install --path .` " +
      "in its repository) and set CLAWMD or pass options.binary to it";
  } else {
    message =
      `no clawmd binary for this platform, ${named}: ${candidates.join(" or ")} is not ` +
      "installed (npm and pnpm install it with clawmd unless optional dependencies are omitted, " +
      "or node_modules came from another platform): reinstall clawmd, or set CLAWMD or pass " +
      "options.binary to a clawmd binary";
  }
  throw new ClawmdError(
    message,
    "no-binary",
    null,
    null,
    null,
    "",
  );
}

/** glibc or musl, for the message of a missing binary (what npm's `libc` field tests). */
function linuxLibc(): string {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)
    ?.header;
  return header?.glibcVersionRuntime !== undefined ? `glibc ${header.glibcVersionRuntime}` : "not glibc";
}

function argv(args: string[], options: ClawmdOptions): { binary: string; argv: string[] } {
  const binary = resolveBinary(options);
  return { binary, argv: options.root !== undefined ? ["--root", options.root, ...args] : args };
}

function run(args: string[], options: ClawmdOptions, input?: string): Promise<Outcome> {
  const { binary, argv: full } = argv(args, options);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  return new Promise((resolve) => {
    const child = execFile(
      binary,
      full,
      { env: options.env ?? process.env, timeout: timeoutMs, maxBuffer: MAX_OUTPUT, encoding: "utf8" },
      (error, stdout, stderr) => {
        // A non-zero exit is not an error here: compose prints its report and exits 1 when a
        // group failed. What is: no process at all, or one killed for taking too long.
        const spawnError =
          error !== null && typeof error.code === "string" ? (error as NodeJS.ErrnoException) : null;
        const timedOut = error !== null && error.killed === true && spawnError === null;
        resolve({ binary, stdout, stderr, spawnError, timedOut, timeoutMs });
      },
    );
    // A write to a process that could not start fails; its error is the callback's.
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(input ?? "");
  });
}

function runSync(args: string[], options: ClawmdOptions, input?: string): Outcome {
  const { binary, argv: full } = argv(args, options);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const result = spawnSync(binary, full, {
    env: options.env ?? process.env,
    timeout: timeoutMs,
    maxBuffer: MAX_OUTPUT,
    encoding: "utf8",
    input: input ?? "",
  });
  const error = (result.error as NodeJS.ErrnoException | undefined) ?? null;
  const timedOut = error?.code === "ETIMEDOUT";
  return {
    binary,
    stdout: result.stdout ?? "",
    stderr: result.stderr ?? "",
    spawnError: timedOut ? null : error,
    timedOut,
    timeoutMs,
  };
}

/** The report of the kind `expected`, or a `ClawmdError` naming what went wrong. */
function parse(
  outcome: Outcome,
  expected: string,
  args: string[],
): ComposeReport | CheckReport | MigrateReport {
  const doc = document(outcome, args);
  const what = `clawmd ${args.join(" ")}`;
  const schema = typeof doc === "object" && doc !== null ? (doc as { $schema?: unknown }).$schema : undefined;
  if (schema !== expected) {
    throw new ClawmdError(
      `${what} printed a report with $schema ${JSON.stringify(schema)}, expected ${JSON.stringify(expected)} ` +
        "(a clawmd of another report version? these types are generated for this one)",
      "bad-output",
      null,
      null,
      null,
      outcome.stderr,
    );
  }
  return doc as ComposeReport | CheckReport | MigrateReport;
}

/** The JSON document clawmd printed, or a `ClawmdError`: clawmd not run, killed, no JSON, or a run failure. */
function document(outcome: Outcome, args: string[]): unknown {
  const what = `clawmd ${args.join(" ")}`;
  const stderr = outcome.stderr.trim();
  const fail = (message: string, code: Code | RunnerCode, report: RunFailure | null = null): never => {
    throw new ClawmdError(message, code, null, null, report, outcome.stderr);
  };
  if (outcome.spawnError !== null) {
    return fail(
      `cannot run clawmd (${JSON.stringify(outcome.binary)}): ${outcome.spawnError.message}; ` +
        "pass options.binary or set CLAWMD to the clawmd binary",
      "spawn-failed",
    );
  }
  if (outcome.timedOut) {
    return fail(
      `${what} did not finish within ${outcome.timeoutMs} ms and was killed ` +
        "(another run holding the group's lock? raise options.timeoutMs or lower lockTimeoutSecs)",
      "timeout",
    );
  }
  let doc: unknown;
  try {
    doc = JSON.parse(outcome.stdout);
  } catch {
    return fail(`${what} printed no JSON report${stderr ? `: ${stderr}` : ""}`, "bad-output");
  }
  const schema = typeof doc === "object" && doc !== null ? (doc as { $schema?: unknown }).$schema : undefined;
  if (schema === SCHEMA.failure) {
    const failure = doc as RunFailure;
    return fail(`${what}: ${failure.error.code}: ${failure.error.message}`, failure.error.code, failure);
  }
  return doc;
}

/** A group composed for a spawn, and the binds of its container: one `clawmd serve` answer. */
export interface Prepared extends Composed {
  /** The binds to make for the group's container, in the order to apply them (as `mounts` gives them). */
  binds: Bind[];
}

/** `prepareSpawn`'s choices: compose's (`ComposeOptions`) without the ones fixed when the service starts. */
export type PrepareOptions = Omit<ComposeOptions, "binary" | "root" | "env">;

/**
 * A long-lived `clawmd serve` process (one per binary and deployment root), as esbuild keeps its
 * service: started at the first request, reused for every spawn, started again at the next
 * request when it died, and never holding the host's event loop open while it has nothing to
 * answer (its process and pipes are unref'd while idle). Each request is one line of JSON and
 * its answer one line: the group composed exactly as `clawmd compose GROUP --json` composes it
 * (the same locks and atomic writes) and, when it composed, the binds `clawmd mounts GROUP
 * --json` prints. The deployment root (`options.root`), the binary and the environment are the
 * service's, fixed when it starts.
 */
export class ClawmdService {
  private child: ChildProcess | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private buffered = "";
  private stderrTail = "";
  private closed = false;

  constructor(private readonly options: ClawmdOptions = {}) {}

  /**
   * Composes `group` before its container is spawned and returns its report entry, the spawn
   * digest and the binds, in one round trip. Rejects with a `ClawmdError` as
   * `composeBeforeSpawn` does (the report's code, `not-delivered` unless `allowIncomplete`), or
   * with the binds' failure (`not-composed`, …), `timeout` (the service is then killed and
   * started again at the next request), `service-exited`, `spawn-failed` or `no-binary`.
   */
  prepareSpawn(group: string, options: PrepareOptions = {}): Promise<Prepared> {
    if (this.closed) {
      return Promise.reject(
        new ClawmdError("clawmd serve: the service was closed", "service-exited", null, group, null, ""),
      );
    }
    let child: ChildProcess;
    try {
      child = this.running();
    } catch (err) {
      return Promise.reject(err);
    }
    const id = this.nextId++;
    const request = serveRequest(id, group, options);
    const timeoutMs = options.timeoutMs ?? this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    return new Promise<Prepared>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.settle(id);
        reject(
          new ClawmdError(
            `clawmd serve: no answer for group ${group} within ${timeoutMs} ms; the service was killed ` +
              "(another run holding the group's lock? raise timeoutMs or lower lockTimeoutSecs)",
            "timeout",
            null,
            group,
            null,
            this.stderrTail,
          ),
        );
        // Answers come in order: one that never came holds back every later one.
        this.stop("SIGKILL");
      }, timeoutMs);
      this.pending.set(id, {
        group,
        timer,
        resolve: (answer) => {
          try {
            resolve(interpretAnswer(group, options, answer, this.stderrTail));
          } catch (err) {
            reject(err);
          }
        },
        reject,
      });
      if (this.pending.size === 1) setReferenced(child, true);
      child.stdin?.write(JSON.stringify(request) + "\n");
    });
  }

  /** Ends the service: its standard input is closed and it exits; pending requests are rejected (`service-exited`). */
  close(): void {
    this.closed = true;
    this.stop(null);
  }

  /** The running service, started if it is not. */
  private running(): ChildProcess {
    if (this.child !== null) return this.child;
    const binary = resolveBinary(this.options);
    const args = this.options.root !== undefined ? ["--root", this.options.root, "serve"] : ["serve"];
    const child = spawn(binary, args, { env: this.options.env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
    this.child = child;
    this.buffered = "";
    this.stderrTail = "";
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => this.receive(chunk));
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-16 * 1024);
    });
    // A write to a service that died fails; its exit rejects what was pending.
    child.stdin?.on("error", () => undefined);
    child.on("error", (err: NodeJS.ErrnoException) => {
      this.died(
        child,
        `cannot run clawmd (${JSON.stringify(binary)}): ${err.message}; pass options.binary or set CLAWMD to the clawmd binary`,
        "spawn-failed",
      );
    });
    child.on("exit", (code, signal) => {
      this.died(child, `clawmd serve exited (${signal ?? `status ${code}`}) before answering`, "service-exited");
    });
    setReferenced(child, false);
    return child;
  }

  private receive(chunk: string): void {
    this.buffered += chunk;
    let end: number;
    while ((end = this.buffered.indexOf("\n")) >= 0) {
      const line = this.buffered.slice(0, end);
      this.buffered = this.buffered.slice(end + 1);
      let answer: ServeAnswer;
      try {
        answer = JSON.parse(line) as ServeAnswer;
      } catch {
        this.failAll(`clawmd serve printed a line that is not JSON: ${line.slice(0, 200)}`, "bad-output");
        this.stop("SIGKILL");
        return;
      }
      // Answers come in request order; one to a line the service could not read as a request
      // (a config over its limit) has no id: it is the oldest request's.
      const id = typeof answer.id === "number" ? answer.id : this.pending.keys().next().value;
      const pending = id === undefined ? undefined : this.settle(id);
      if (pending === undefined) continue; // answered after its timeout
      if (answer.$schema !== SCHEMA.serve) {
        pending.reject(
          new ClawmdError(
            `clawmd serve printed an answer with $schema ${JSON.stringify(answer.$schema)}, expected ` +
              `${JSON.stringify(SCHEMA.serve)} (a clawmd of another report version?)`,
            "bad-output",
            null,
            pending.group,
            null,
            this.stderrTail,
          ),
        );
        continue;
      }
      pending.resolve(answer);
    }
  }

  /** Forgets request `id` (its timer cleared) and returns it. */
  private settle(id: number): Pending | undefined {
    const pending = this.pending.get(id);
    if (pending === undefined) return undefined;
    clearTimeout(pending.timer);
    this.pending.delete(id);
    if (this.pending.size === 0 && this.child !== null) setReferenced(this.child, false);
    return pending;
  }

  private died(child: ChildProcess, message: string, code: RunnerCode): void {
    if (this.child !== child) return;
    this.child = null;
    this.failAll(message, code);
  }

  private failAll(message: string, code: RunnerCode): void {
    for (const [id, pending] of [...this.pending]) {
      this.settle(id);
      pending.reject(new ClawmdError(message, code, null, pending.group, null, this.stderrTail));
    }
  }

  private stop(signal: NodeJS.Signals | null): void {
    const child = this.child;
    if (child === null) return;
    this.child = null;
    this.failAll("clawmd serve was stopped before it answered", "service-exited");
    child.stdin?.end();
    if (signal !== null) child.kill(signal);
  }
}

/** A request waiting for its answer. */
interface Pending {
  group: string;
  timer: NodeJS.Timeout;
  resolve: (answer: ServeAnswer) => void;
  reject: (err: unknown) => void;
}

/** Lets the service (process and pipes) hold the event loop open, or not. */
function setReferenced(child: ChildProcess, referenced: boolean): void {
  const handles: ({ ref?: () => void; unref?: () => void } | null | undefined)[] = [
    child,
    child.stdin as unknown as { ref?: () => void; unref?: () => void } | null,
    child.stdout as unknown as { ref?: () => void; unref?: () => void } | null,
    child.stderr as unknown as { ref?: () => void; unref?: () => void } | null,
  ];
  for (const handle of handles) {
    if (referenced) handle?.ref?.();
    else handle?.unref?.();
  }
}

/** The request (`clawmd schema serve-request`) that prepares `group`'s spawn with `options`. */
function serveRequest(id: number, group: string, options: PrepareOptions): ServeRequest {
  const request: ServeRequest = { id, group };
  if (options.delivery !== undefined) request.delivery = options.delivery;
  if (options.provider !== undefined) request.provider = options.provider;
  if (options.approveExternal === true) request.approve_external = true;
  if (options.lockTimeoutSecs !== undefined) request.lock_timeout_secs = options.lockTimeoutSecs;
  if (options.config !== undefined) request.config = options.config as { [k: string]: unknown };
  return request;
}

/** What a `clawmd serve` answer gives, or a `ClawmdError`. */
function interpretAnswer(
  group: string,
  options: Pick<ComposeOptions, "allowIncomplete">,
  answer: ServeAnswer,
  stderr: string,
): Prepared {
  const report = answer.compose;
  if (report === null) {
    const error = answer.error ?? { code: "bad-output" as const, message: "the answer has no report and no error" };
    throw new ClawmdError(`clawmd serve ${group}: ${error.code}: ${error.message}`, error.code, null, group, answer, stderr);
  }
  const composed = interpretReport(group, options, report, stderr);
  if (answer.error !== null || answer.mounts === null) {
    const error = answer.error ?? { code: "bad-output" as const, message: "the answer has no binds" };
    throw new ClawmdError(`clawmd serve ${group}: ${error.code}: ${error.message}`, error.code, null, group, answer, stderr);
  }
  return { ...composed, binds: answer.mounts };
}

/** How `prepareSpawn` reaches clawmd: its Node addon in this process, or a `clawmd serve` process. */
export type Way = "addon" | "service";

/** `prepareSpawn`'s options: compose's, and which way to reach clawmd. */
export interface PrepareSpawnOptions extends ComposeOptions {
  /**
   * The addon to load, a file named `*.node` (`crates/clawmd-node`'s library, renamed; default:
   * `$CLAWMD_ADDON`, else the platform package's `clawmd.node`: see `resolveAddon`).
   */
  addon?: string;
  /**
   * `"addon"`: through the addon, or reject (`addon-failed`, `no-binary` when there is none);
   * `"service"`: through `clawmd serve` even where an addon is found. Default: the addon when
   * `resolveAddon` finds one that loads, else `clawmd serve`.
   */
  way?: Way;
}

/** What the addon (crates/clawmd-node) exports. */
interface NativeAddon {
  ClawmdService: new (options: NativeOptions) => NativeService;
}

/** The addon's service options: the deployment root and `clawmd serve`'s flags. */
interface NativeOptions {
  root: string;
  groupsDir?: string;
  containerDir?: string;
  appMount?: string;
  workspaceMount?: string;
  delivery?: string;
  provider?: string;
  claudeVersion?: string;
  lockTimeoutSecs?: number;
}

/** One deployment's service in the addon: a `clawmd serve` request in, its answer out (JSON text), on this thread; its bookkeeping left for `finishLater`. */
interface NativeService {
  answer(request: string): string;
  answerAsync(request: string): Promise<string>;
  finishLater(): void;
}

/**
 * The addon to load: `options.addon`, else `$CLAWMD_ADDON` (of `options.env`, default this
 * process's environment), else `clawmd.node` of the platform package installed beside this one
 * (beside its `bin/clawmd`), unless a binary is named (`options.binary`, `$CLAWMD`: that
 * clawmd is the one to run, through `clawmd serve`) and `way` is not `"addon"`. `null` when
 * there is none.
 */
export function resolveAddon(options: Pick<PrepareSpawnOptions, "addon" | "binary" | "env" | "way"> = {}): string | null {
  if (options.addon !== undefined) return options.addon;
  const env = options.env ?? process.env;
  const fromEnv = env["CLAWMD_ADDON"];
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  const binaryNamed = options.binary !== undefined || (env["CLAWMD"] !== undefined && env["CLAWMD"] !== "");
  if (binaryNamed && options.way !== "addon") return null;
  const require = createRequire(import.meta.url);
  for (const name of PLATFORM_PACKAGES[`${process.platform}-${process.arch}`] ?? []) {
    try {
      return require.resolve(`${name}/clawmd.node`);
    } catch {
      // not installed here, or a platform package without the addon: try the next one
    }
  }
  return null;
}

const addons = new Map<string, NativeAddon>();

/** The addon at `path`, loaded once. */
function loadAddon(path: string): NativeAddon {
  let addon = addons.get(path);
  if (addon === undefined) {
    // require() loads only a file named *.node as an addon (it would run anything else as JavaScript).
    if (!path.endsWith(".node")) throw new Error("not a .node file (copy or link it to one named clawmd.node)");
    addon = createRequire(import.meta.url)(path) as NativeAddon;
    if (typeof addon?.ClawmdService !== "function") {
      throw new Error("it exports no ClawmdService (not clawmd's addon, or another version of it)");
    }
    addons.set(path, addon);
  }
  return addon;
}

/** The `CLAWMD_*` variable each of the addon's options comes from, as `clawmd serve` reads its flags. */
const NATIVE_VARIABLES = {
  groupsDir: "CLAWMD_GROUPS_DIR",
  containerDir: "CLAWMD_CONTAINER_DIR",
  appMount: "CLAWMD_APP_MOUNT",
  workspaceMount: "CLAWMD_WORKSPACE_MOUNT",
  delivery: "CLAWMD_DELIVERY",
  provider: "CLAWMD_PROVIDER",
  claudeVersion: "CLAWMD_CLAUDE_VERSION",
  lockTimeoutSecs: "CLAWMD_LOCK_TIMEOUT",
} as const;

/** The addon's options for `root`: `clawmd serve`'s flags, from the `CLAWMD_*` variables serve reads them from. */
function nativeOptions(root: string, env: NodeJS.ProcessEnv): NativeOptions {
  const options: NativeOptions = { root };
  for (const [key, variable] of Object.entries(NATIVE_VARIABLES)) {
    const value = env[variable];
    if (value === undefined) continue;
    if (key === "lockTimeoutSecs") options.lockTimeoutSecs = /^[0-9]+$/.test(value) ? Number(value) : NaN;
    else options[key as Exclude<keyof typeof NATIVE_VARIABLES, "lockTimeoutSecs">] = value;
  }
  return options;
}

/**
 * One deployment's spawn service in the addon: each `prepareSpawn` is one request answered
 * exactly as `clawmd serve` answers it (the same library call), on this thread, as nanoclaw's
 * own composer runs, the group's bookkeeping from a `setImmediate` once the answer is handed
 * on; a request whose group's lock another run holds is answered again off the event loop
 * (libuv's thread pool), and the requests after it wait for it there.
 */
class AddonService {
  private nextId = 1;
  /** Answers being made off the event loop, and the last of them: later requests wait for it. */
  private offThread = 0;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly native: NativeService,
    private readonly path: string,
  ) {}

  prepareSpawn(group: string, options: PrepareOptions, timeoutMs: number): Promise<Prepared> {
    if (this.offThread > 0) return this.answerOffThread(group, options, timeoutMs);
    // On this thread, without waiting for a lock another run holds: that wait is made off the
    // event loop.
    const waits = options.lockTimeoutSecs !== 0;
    const request = serveRequest(this.nextId++, group, waits ? { ...options, lockTimeoutSecs: 0 } : options);
    let answer: ServeAnswer;
    try {
      const text = this.native.answer(JSON.stringify(request));
      // The group's bookkeeping once the answer is handed on (the next answer does it first).
      setImmediate(() => this.native.finishLater());
      answer = this.parse(group, text);
    } catch (err) {
      return Promise.reject(this.failure(group, err));
    }
    if (waits && answer.compose?.groups?.[0]?.error?.code === "lock-timeout") {
      return this.answerOffThread(group, options, timeoutMs);
    }
    try {
      return Promise.resolve(interpretAnswer(group, options, answer, ""));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * A request answered on libuv's thread pool, after the ones before it. A request that takes
   * longer than `timeoutMs` rejects with `timeout`; unlike a service process, the addon cannot
   * be killed: that request is still answered (its compose is whole or not done, as ever) and
   * the next ones wait for it.
   */
  private answerOffThread(group: string, options: PrepareOptions, timeoutMs: number): Promise<Prepared> {
    const request = JSON.stringify(serveRequest(this.nextId++, group, options));
    this.offThread++;
    const answered = this.queue.then(() => this.native.answerAsync(request));
    this.queue = answered.catch(() => undefined).finally(() => this.offThread--);
    return new Promise<Prepared>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new ClawmdError(
            `clawmd addon: no answer for group ${group} within ${timeoutMs} ms ` +
              "(another run holding the group's lock? raise timeoutMs or lower lockTimeoutSecs); " +
              "the request is still answered, and later ones wait for it",
            "timeout",
            null,
            group,
            null,
            "",
          ),
        );
      }, timeoutMs);
      answered.then(
        (text) => {
          clearTimeout(timer);
          try {
            resolve(interpretAnswer(group, options, this.parse(group, text), ""));
          } catch (err) {
            reject(err);
          }
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(this.failure(group, err));
        },
      );
    });
  }

  private failure(group: string, err: unknown): unknown {
    if (err instanceof ClawmdError) return err;
    const message = err instanceof Error ? err.message : String(err);
    return new ClawmdError(`clawmd addon (${this.path}): ${message}`, "addon-failed", null, group, null, "");
  }

  private parse(group: string, text: string): ServeAnswer {
    const fail = (message: string): never => {
      throw new ClawmdError(`clawmd addon (${this.path}): ${message}`, "bad-output", null, group, null, "");
    };
    let answer: ServeAnswer;
    try {
      answer = JSON.parse(text) as ServeAnswer;
    } catch {
      return fail(`answered with text that is not JSON: ${text.slice(0, 200)}`);
    }
    if (answer?.$schema !== SCHEMA.serve) {
      return fail(
        `answered with $schema ${JSON.stringify(answer?.$schema)}, expected ${JSON.stringify(SCHEMA.serve)} ` +
          "(an addon of another report version?)",
      );
    }
    return answer;
  }
}

const services = new Map<string, ClawmdService>();
const addonServices = new Map<string, AddonService>();
/** The platform package's addons that did not load (or refused the settings): `clawmd serve` answers instead. */
const unusable = new Set<string>();

/**
 * Composes `group` before its container is spawned and returns the report, the spawn digest
 * and the binds of its container in one call: through clawmd's Node addon in this process
 * when `resolveAddon` finds one (one service per addon, root and `CLAWMD_*` settings, kept
 * for the life of the host), else over the shared `clawmd serve` of this binary and root (and
 * `env`, when given: `ClawmdService`, started at the first call, kept for the life of the host
 * without keeping it alive); `options.way` forces either. Both answer the same request with
 * the same answer, and resolve or reject alike.
 */
export function prepareSpawn(group: string, options: PrepareSpawnOptions = {}): Promise<Prepared> {
  const env = options.env ?? process.env;
  const root = options.root ?? env["CLAWMD_ROOT"] ?? process.cwd();
  const { binary: _binary, root: _root, env: _env, addon: _addon, way, ...rest } = options;
  if (way !== "service") {
    let service: AddonService | null;
    try {
      service = addonService(root, options);
    } catch (err) {
      return Promise.reject(err);
    }
    if (service !== null) return service.prepareSpawn(group, rest, options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  }
  let binary: string;
  try {
    binary = resolveBinary(options);
  } catch (err) {
    return Promise.reject(err);
  }
  const key = JSON.stringify([binary, root, options.env === undefined ? null : options.env]);
  let service = services.get(key);
  if (service === undefined) {
    service = new ClawmdService({ binary, root, ...(options.env !== undefined ? { env: options.env } : {}) });
    services.set(key, service);
  }
  return service.prepareSpawn(group, rest);
}

/**
 * The addon's service for `root` and `options`, made at the first call; `null` to go through
 * `clawmd serve` (no addon found, or the platform package's does not load and none was asked
 * for). Throws a `ClawmdError` when the addon asked for cannot serve.
 */
function addonService(root: string, options: PrepareSpawnOptions): AddonService | null {
  const path = resolveAddon(options);
  const fromEnv = (options.env ?? process.env)["CLAWMD_ADDON"];
  const asked = options.way === "addon" || options.addon !== undefined || (fromEnv !== undefined && fromEnv !== "");
  if (path === null) {
    if (options.way !== "addon") return null;
    throw new ClawmdError(
      `no clawmd addon for this platform, ${process.platform}-${process.arch}: pass options.addon or set ` +
        `CLAWMD_ADDON to a clawmd.node, install the platform package (${(PLATFORM_PACKAGES[`${process.platform}-${process.arch}`] ?? []).join(", ") || "none for this platform"}), ` +
        'or leave way unset (or "service") to go through clawmd serve',
      "no-binary",
      null,
      null,
      null,
      "",
    );
  }
  const settings = nativeOptions(root, options.env ?? process.env);
  const key = JSON.stringify([path, settings]);
  let service = addonServices.get(key);
  if (service !== undefined) return service;
  if (unusable.has(key) && !asked) return null;
  let native: NativeService;
  try {
    native = new (loadAddon(path).ClawmdService)(settings);
  } catch (err) {
    unusable.add(key);
    if (!asked) return null;
    // The addon names the option; the host set the variable.
    let message = err instanceof Error ? err.message : String(err);
    const option = /^([A-Za-z]+): /.exec(message)?.[1];
    const variable = option === undefined ? undefined : NATIVE_VARIABLES[option as keyof typeof NATIVE_VARIABLES];
    if (variable !== undefined) message = `${variable}${message.slice(option!.length)}`;
    throw new ClawmdError(
      `cannot use the clawmd addon ${JSON.stringify(path)}: ${message}` +
        " (fix the variable, or the addon: pass options.addon or set CLAWMD_ADDON to another," +
        ' or way: "service" to go through clawmd serve)',
      "addon-failed",
      null,
      null,
      null,
      "",
    );
  }
  service = new AddonService(native, path);
  addonServices.set(key, service);
  return service;
}
