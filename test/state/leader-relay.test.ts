import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConfigOverrides } from "../../src/config.js";
import { signPeerCall } from "../../src/proxy/leader-decisions.js";
import type { RunningRouter } from "../../src/server.js";
import { StateSecret } from "../../src/state/state-secret.js";
import { captureLogs } from "../helpers/log-capture.js";
import {
  redisSkipReason,
  startRedis,
  TEST_STATE_SECRET,
  type TestRedis,
} from "../helpers/redis.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

/** One streamed completion a gated worker holds open: the test sends its chunks. */
interface HeldStream {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** Set when the router closed the request before the worker ended it (its client left). */
  aborted: boolean;
}

/**
 * A worker whose streamed answers the test writes chunk by chunk: each completion it gets is held
 * (headers sent) until the test writes and ends it. Any GET (health, models) is a plain 200.
 */
async function gatedWorker(arrivals: HeldStream[]) {
  const held: HeldStream[] = [];
  const server: Server = createServer((req, res) => {
    if (req.method !== "POST") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"object":"list","data":[]}');
      return;
    }
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      const stream: HeldStream = { req, res, aborted: false };
      res.on("close", () => {
        if (!res.writableFinished) stream.aborted = true;
      });
      held.push(stream);
      arrivals.push(stream);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    held,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type GatedWorker = Awaited<ReturnType<typeof gatedWorker>>;

const chunk = (text: string) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, text, finish_reason: null }] })}\n\n`;

/** A prompt no worker holds: long enough to be a new prefix worth a claim. */
const freshPrompt = () =>
  `Tenant ${randomBytes(6).toString("hex")}. ${"Answer as the tenant's policies say. ".repeat(20)}`;

/** A streamed completion whose body the test reads chunk by chunk. */
async function openStream(
  routerUrl: string,
  prompt: string,
  options: { headers?: Record<string, string>; signal?: AbortSignal } = {},
) {
  const res = await fetch(`${routerUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...options.headers },
    body: JSON.stringify({ model: "m", prompt, max_tokens: 4, stream: true }),
    ...(options.signal !== undefined ? { signal: options.signal } : {}),
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  return {
    res,
    /** The next piece of the body as it arrives; undefined at its end. */
    async next(): Promise<string | undefined> {
      const { done, value } = await reader.read();
      return done ? undefined : decoder.decode(value);
    },
  };
}

const inFlight = (router: RunningRouter) =>
  router.context.registry.list().reduce((sum, w) => sum + w.ownInFlight, 0);

const metricText = (router: RunningRouter, name: string) =>
  router.context.metrics.registry.getSingleMetricAsString(name);

const relays = async (router: RunningRouter, outcome: string) => {
  const text = await metricText(router, "radixgate_state_relays_total");
  return Number(new RegExp(`outcome="${outcome}"} (\\d+)`).exec(text)?.[1] ?? 0);
};

/** A loopback URL nothing listens on: connecting to it is refused. */
async function refusingUrl(): Promise<string> {
  const closed = createNetServer();
  await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  return url;
}

/** Every completion the workers got, in order of arrival. */
const arrivals: HeldStream[] = [];

/** The held stream the next request reaches, on whichever worker. */
const nextHeld = async (before: number) => {
  await waitFor(() => arrivals.length > before, 10_000, "the request at a worker");
  return arrivals[before]!;
};
const heldCount = () => arrivals.length;

describe.skipIf(redisSkipReason !== undefined)(
  `new prefixes relayed to the leader replica${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    let redis: TestRedis;
    let workers: GatedWorker[] = [];
    const routers: RunningRouter[] = [];

    beforeAll(async () => {
      redis = await startRedis();
      workers = [await gatedWorker(arrivals), await gatedWorker(arrivals)];
    });
    afterAll(async () => {
      for (const w of workers) for (const h of w.held) h.res.destroy();
      await Promise.allSettled(routers.map((r) => r.stop(100)));
      await Promise.allSettled(workers.map((w) => w.close()));
      await redis?.stop();
    });

    const replica = async (prefix: string, overrides: ConfigOverrides = {}) => {
      const router = await startTestRouter({
        workerUrls: workers.map((w) => w.url),
        stateUrl: redis.url,
        stateSecret: TEST_STATE_SECRET,
        stateKeyPrefix: prefix,
        stateLoadIntervalMs: 50,
        // Wide: on a loaded machine the defaults could run out and hide the relay or the claim.
        stateClaimTimeoutMs: 5000,
        stateRelayTimeoutMs: 5000,
        ...overrides,
      });
      routers.push(router);
      return router;
    };

    /**
     * A leader (started first) and a follower, each advertising the URL it listens on (port 0:
     * known only once listening), once the follower relays to the leader.
     */
    const relayingPair = async (overrides: ConfigOverrides = {}, leaderUrl?: string) => {
      const prefix = `relay-${randomBytes(4).toString("hex")}`;
      const leader = await replica(prefix, overrides);
      const follower = await replica(prefix, overrides);
      leader.context.sharedState!.advertise(leaderUrl ?? leader.url);
      follower.context.sharedState!.advertise(follower.url);
      const target = leaderUrl ?? leader.url;
      await waitFor(
        () =>
          follower.context.replication?.relayTarget() === target &&
          leader.context.replication?.decidesAlone() === true,
        10_000,
        "the follower relaying to the leader",
      );
      return { leader, follower };
    };

    it("--state-relay new-prefixes: a follower relays a new prefix whole: the leader decides, counts and streams it back chunk by chunk", async () => {
      const { leader, follower } = await relayingPair({ stateRelay: "new-prefixes" });
      const before = heldCount();
      const stream = await openStream(follower.url, freshPrompt(), {
        headers: { "x-request-id": "relay-me-1" },
      });
      const held = await nextHeld(before);
      expect(stream.res.status).toBe(200);
      expect(stream.res.headers.get("content-type")).toMatch(/^text\/event-stream/);
      // The leader chose the worker (its header), and sent the request on as a relayed one.
      expect(stream.res.headers.get("x-radixgate-worker")).not.toBeNull();
      expect(held.req.headers["x-radixgate-relayed"]).toBe("1");
      expect(held.req.headers["x-request-id"]).toBe("relay-me-1");
      // The leader counts it until its end; the follower holds no lease for it.
      expect(inFlight(leader)).toBe(1);
      expect(inFlight(follower)).toBe(0);
      // Chunk by chunk: each reaches the client before the next is written.
      held.res.write(chunk("one"));
      expect(await stream.next()).toContain('"one"');
      held.res.write(chunk("two"));
      expect(await stream.next()).toContain('"two"');
      expect(inFlight(leader)).toBe(1);
      held.res.end("data: [DONE]\n\n");
      let rest = "";
      for (let piece = await stream.next(); piece !== undefined; piece = await stream.next())
        rest += piece;
      expect(rest).toContain("[DONE]");
      await waitFor(() => inFlight(leader) === 0, 5000, "the leader's count back to 0");
      expect(inFlight(follower)).toBe(0);
      expect(await relays(follower, "relayed")).toBe(1);
      // The leader decided it alone: no claim made on either side.
      expect(await metricText(leader, "radixgate_state_claims_total")).not.toMatch(/outcome=/);
      expect(await metricText(follower, "radixgate_state_claims_total")).not.toMatch(/outcome=/);
    });

    /**
     * A prompt the leader served (its own request, never relayed) once the follower's index holds
     * it too, so that the follower would not claim it: a held prefix, not a new one.
     */
    const heldOnBoth = async (leader: RunningRouter, follower: RunningRouter) => {
      const prompt = freshPrompt();
      const before = heldCount();
      const first = await openStream(leader.url, prompt);
      const held = await nextHeld(before);
      expect(held.req.headers["x-radixgate-relayed"]).toBeUndefined();
      held.res.end("data: [DONE]\n\n");
      while ((await first.next()) !== undefined) {}
      expect(await relays(leader, "relayed")).toBe(0);
      const workers = follower.context.registry.list();
      const matched: number[] = [];
      await waitFor(
        () => {
          // The workers list no models: the index keeps their texts under none.
          follower.context.index.match(prompt, undefined, workers, matched);
          return Math.max(...matched) >= prompt.length;
        },
        10_000,
        "the leader's decision in the follower's index",
      );
      return prompt;
    };

    it("--state-relay all: a follower relays a request on a prefix it holds; the leader serves and counts it", async () => {
      const { leader, follower } = await relayingPair({ stateRelay: "all" });
      const prompt = await heldOnBoth(leader, follower);
      const before = heldCount();
      const stream = await openStream(follower.url, prompt);
      const held = await nextHeld(before);
      expect(stream.res.status).toBe(200);
      expect(held.req.headers["x-radixgate-relayed"]).toBe("1");
      expect(inFlight(leader)).toBe(1);
      expect(inFlight(follower)).toBe(0);
      held.res.write(chunk("served"));
      expect(await stream.next()).toContain('"served"');
      held.res.end("data: [DONE]\n\n");
      while ((await stream.next()) !== undefined) {}
      expect(await relays(follower, "relayed")).toBe(1);
      expect(await relays(leader, "relayed")).toBe(0);
    });

    it("--state-relay new-prefixes: the same request on a held prefix is decided where it arrives", async () => {
      const { leader, follower } = await relayingPair({ stateRelay: "new-prefixes" });
      const prompt = await heldOnBoth(leader, follower);
      const before = heldCount();
      const stream = await openStream(follower.url, prompt);
      const held = await nextHeld(before);
      expect(stream.res.status).toBe(200);
      expect(held.req.headers["x-radixgate-relayed"]).toBeUndefined();
      expect(inFlight(follower)).toBe(1);
      expect(inFlight(leader)).toBe(0);
      held.res.end("data: [DONE]\n\n");
      while ((await stream.next()) !== undefined) {}
      expect(await relays(follower, "relayed")).toBe(0);
    });

    it("a request already relayed is decided where it lands, never relayed again", async () => {
      const { leader, follower } = await relayingPair();
      const before = heldCount();
      const stream = await openStream(follower.url, freshPrompt(), {
        headers: { "x-radixgate-relayed": "1" },
      });
      const held = await nextHeld(before);
      expect(stream.res.status).toBe(200);
      expect(inFlight(follower)).toBe(1);
      expect(inFlight(leader)).toBe(0);
      held.res.end("data: [DONE]\n\n");
      while ((await stream.next()) !== undefined) {}
      expect(await relays(follower, "relayed")).toBe(0);
      // Decided here as without relaying: with a claim.
      expect(await metricText(follower, "radixgate_state_claims_total")).toMatch(
        /outcome="won"} 1/,
      );
    });

    it("a leader that cannot be reached or says nothing: decided here with a claim, relays paused", async () => {
      // Accepts connections and never answers.
      const sockets: Socket[] = [];
      const silent: NetServer = createNetServer((socket) => {
        sockets.push(socket);
        socket.resume();
      });
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      try {
        const { leader, follower } = await relayingPair({ stateRelayTimeoutMs: 300 }, silentUrl);
        const before = heldCount();
        const started = Date.now();
        const stream = await openStream(follower.url, freshPrompt());
        const held = await nextHeld(before);
        expect(stream.res.status).toBe(200);
        expect(Date.now() - started).toBeGreaterThanOrEqual(290);
        expect(inFlight(follower)).toBe(1);
        expect(inFlight(leader)).toBe(0);
        held.res.end("data: [DONE]\n\n");
        while ((await stream.next()) !== undefined) {}
        expect(await relays(follower, "fallback")).toBe(1);
        expect(await metricText(follower, "radixgate_state_claims_total")).toMatch(
          /outcome="won"} 1/,
        );
        // Paused for a second: the next new prefix is not sent to the silent leader again.
        const next = await openStream(follower.url, freshPrompt());
        const again = await nextHeld(before + 1);
        again.res.end("data: [DONE]\n\n");
        while ((await next.next()) !== undefined) {}
        expect(await relays(follower, "fallback")).toBe(1);
      } finally {
        for (const s of sockets) s.destroy();
        silent.close();
      }
    });

    it("a leader that refuses the connection: decided here, answered", async () => {
      const deadUrl = await refusingUrl();
      const { follower } = await relayingPair({}, deadUrl);
      const before = heldCount();
      const stream = await openStream(follower.url, freshPrompt());
      const held = await nextHeld(before);
      expect(stream.res.status).toBe(200);
      held.res.write(chunk("here"));
      expect(await stream.next()).toContain('"here"');
      held.res.end("data: [DONE]\n\n");
      while ((await stream.next()) !== undefined) {}
      expect(await relays(follower, "fallback")).toBe(1);
      expect(await relays(follower, "relayed")).toBe(0);
    });

    /** A stand-in leader whose answer to a relayed request `answer` writes (then it may break). */
    const fakeLeader = async (answer: (res: ServerResponse) => void) => {
      const server = createServer((req, res) => {
        req.resume();
        req.on("end", () => answer(res));
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => {
          server.closeAllConnections();
          server.close();
        },
      };
    };

    it("a leader that breaks after saying it has the request: a 502, never decided again here", async () => {
      const leader = await fakeLeader((res) => {
        res.writeProcessing();
        setTimeout(() => res.socket?.destroy(), 20);
      });
      try {
        const { follower } = await relayingPair({}, leader.url);
        const before = heldCount();
        const res = await fetch(`${follower.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", prompt: freshPrompt(), max_tokens: 4 }),
        });
        expect(res.status).toBe(502);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
          "upstream_error",
        );
        // It may have run at the leader: not sent to a worker from here too.
        expect(heldCount()).toBe(before);
        expect(await relays(follower, "fallback")).toBe(0);
      } finally {
        leader.close();
      }
    });

    it("a leader's stream that breaks mid-way ends the client's stream with an error event", async () => {
      const leader = await fakeLeader((res) => {
        res.writeProcessing();
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(chunk("partial"));
        setTimeout(() => res.socket?.destroy(), 50);
      });
      try {
        const { follower } = await relayingPair({}, leader.url);
        const before = heldCount();
        const stream = await openStream(follower.url, freshPrompt());
        expect(stream.res.status).toBe(200);
        let body = "";
        for (let piece = await stream.next(); piece !== undefined; piece = await stream.next())
          body += piece;
        expect(body).toContain('"partial"');
        expect(body).toMatch(/data: \{"error":\{.*"code":"upstream_error"/);
        expect(heldCount()).toBe(before);
      } finally {
        leader.close();
      }
    });

    it.each(["decisions", "all"] as const)(
      "--state-relay %s: the leader stopped, the next replica by start order leads once its load value expires, and the last defers to it",
      async (stateRelay) => {
        const prefix = `relay-${randomBytes(4).toString("hex")}`;
        const first = await replica(prefix, { stateRelay });
        const second = await replica(prefix, { stateRelay });
        const third = await replica(prefix, { stateRelay });
        for (const r of [first, second, third]) r.context.sharedState!.advertise(r.url);
        await waitFor(
          () =>
            third.context.replication?.relayTarget() === first.url &&
            second.context.replication?.relayTarget() === first.url,
          10_000,
          "both followers relaying to the first",
        );
        await first.stop(100);
        // Its value lives 750 ms past its last publish; then the second is the first-started alive.
        await waitFor(
          () =>
            second.context.replication?.decidesAlone() === true &&
            third.context.replication?.relayTarget() === second.url,
          10_000,
          "the second leading and the third relaying to it",
        );
        const before = heldCount();
        const stream = await openStream(third.url, freshPrompt());
        const held = await nextHeld(before);
        expect(stream.res.status).toBe(200);
        // Served by the new leader (all), or carried by the last one on its decision (decisions).
        expect(held.req.headers["x-radixgate-relayed"]).toBe(
          stateRelay === "all" ? "1" : undefined,
        );
        expect(inFlight(second)).toBe(1);
        expect(inFlight(third)).toBe(0);
        expect(await metricText(second, "radixgate_state_leader")).toMatch(
          /radixgate_state_leader 1/,
        );
        held.res.end("data: [DONE]\n\n");
        while ((await stream.next()) !== undefined) {}
      },
    );

    it.each(["decisions", "all"] as const)(
      "--state-relay %s: the client leaving mid-stream ends the worker's request and the leader's count",
      async (stateRelay) => {
        const { leader, follower } = await relayingPair({ stateRelay });
        const before = heldCount();
        const client = new AbortController();
        const stream = await openStream(follower.url, freshPrompt(), { signal: client.signal });
        const held = await nextHeld(before);
        held.res.write(chunk("first"));
        expect(await stream.next()).toContain('"first"');
        expect(inFlight(leader)).toBe(1);
        client.abort();
        await waitFor(() => held.aborted, 5000, "the worker's request closed");
        await waitFor(() => inFlight(leader) === 0, 5000, "the leader's count back to 0");
        expect(inFlight(follower)).toBe(0);
      },
    );

    /** The router's id of the gated worker a held stream reached. */
    const workerOf = (router: RunningRouter, held: HeldStream) => {
      const gated = workers.find((w) => w.held.includes(held));
      return router.context.registry.get(gated?.url ?? "")!;
    };

    it("--state-relay decisions (the default): the leader decides and counts every request; the follower carries it to the worker and reports its first byte and its end", async () => {
      const { leader, follower } = await relayingPair();
      // Which replica decides, as Grafana reads it.
      expect(await metricText(leader, "radixgate_state_leader")).toMatch(
        /radixgate_state_leader 1/,
      );
      expect(await metricText(follower, "radixgate_state_leader")).toMatch(
        /radixgate_state_leader 0/,
      );
      // A prefix both hold: decided by the leader anyway.
      const prompt = await heldOnBoth(leader, follower);
      const before = heldCount();
      const stream = await openStream(follower.url, prompt, {
        headers: { "x-request-id": "decide-me-1" },
      });
      const held = await nextHeld(before);
      expect(stream.res.status).toBe(200);
      expect(stream.res.headers.get("content-type")).toMatch(/^text\/event-stream/);
      // From the follower straight to the worker: none of the replicas' own headers reach it.
      expect(held.req.headers["x-radixgate-relayed"]).toBeUndefined();
      expect(held.req.headers["x-radixgate-call"]).toBeUndefined();
      expect(held.req.headers["x-radixgate-peer"]).toBeUndefined();
      expect(held.req.headers["x-request-id"]).toBe("decide-me-1");
      const worker = workerOf(leader, held);
      expect(stream.res.headers.get("x-radixgate-worker")).toBe(worker.id);
      expect(stream.res.headers.get("x-radixgate-route")).not.toBeNull();
      // The leader counts it (prefill under way) until the follower says otherwise.
      expect(inFlight(leader)).toBe(1);
      expect(inFlight(follower)).toBe(0);
      expect(worker.pendingPrefillRequests).toBe(1);
      held.res.write(chunk("one"));
      expect(await stream.next()).toContain('"one"');
      await waitFor(
        () => worker.pendingPrefillRequests === 0,
        5000,
        "the first byte at the leader",
      );
      expect(inFlight(leader)).toBe(1);
      held.res.write(chunk("two"));
      expect(await stream.next()).toContain('"two"');
      held.res.end("data: [DONE]\n\n");
      let rest = "";
      for (let piece = await stream.next(); piece !== undefined; piece = await stream.next())
        rest += piece;
      expect(rest).toContain("[DONE]");
      await waitFor(() => inFlight(leader) === 0, 5000, "the end at the leader");
      expect(await relays(follower, "relayed")).toBe(1);
      // Counted once in the fleet, where its client is: the leader counts only its own request.
      const served = async (router: RunningRouter) =>
        /radixgate_requests_total\{endpoint="completions",status="200"\} (\d+)/.exec(
          await metricText(router, "radixgate_requests_total"),
        )?.[1];
      expect(await served(follower)).toBe("1");
      expect(await served(leader)).toBe("1");
    });

    it("--state-relay decisions: the engine's token counts in the answer reach the leader", async () => {
      const { leader, follower } = await relayingPair({ stateRelay: "decisions" });
      const before = heldCount();
      const answer = fetch(`${follower.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "m",
          prompt: freshPrompt(),
          max_tokens: 4,
          stream: true,
          stream_options: { include_usage: true },
        }),
      });
      const held = await nextHeld(before);
      const worker = workerOf(leader, held);
      held.res.write(chunk("done"));
      const usage = { prompt_tokens: 4321, completion_tokens: 4, total_tokens: 4325 };
      held.res.write(`data: ${JSON.stringify({ choices: [], usage })}\n\n`);
      held.res.end("data: [DONE]\n\n");
      const res = await answer;
      expect(await res.text()).toContain('"prompt_tokens":4321');
      await waitFor(
        async () =>
          (await metricText(leader, "radixgate_engine_prompt_tokens_total")).includes(
            `worker="${worker.id}"} 4321`,
          ),
        5000,
        "the leader's count of the engine's prompt tokens",
      );
      expect(await metricText(follower, "radixgate_engine_prompt_tokens_total")).not.toContain(
        "4321",
      );
    });

    it("--state-relay decisions: a worker the follower cannot reach is tried again as the leader chooses", async () => {
      const deadUrl = await refusingUrl();
      const { leader, follower } = await relayingPair({
        stateRelay: "decisions",
        workerUrls: [deadUrl, workers[0]!.url],
      });
      // The live worker busy with one of the leader's own: a new prefix is cheaper on the other.
      const before = heldCount();
      const busy = await openStream(leader.url, freshPrompt());
      const held = await nextHeld(before);
      const retries = async () =>
        Number(/} (\d+)/.exec(await metricText(leader, "radixgate_retries_total"))?.[1] ?? 0);
      const retriedBefore = await retries();
      const stream = await openStream(follower.url, freshPrompt());
      const next = await nextHeld(before + 1);
      expect(stream.res.status).toBe(200);
      expect(workerOf(leader, next).url).toBe(workers[0]!.url);
      expect(await retries()).toBeGreaterThan(retriedBefore);
      next.res.end("data: [DONE]\n\n");
      held.res.end("data: [DONE]\n\n");
      while ((await stream.next()) !== undefined) {}
      while ((await busy.next()) !== undefined) {}
      await waitFor(() => inFlight(leader) === 0, 5000, "the leader's count back to 0");
    });

    it("--state-relay decisions: a call not signed with the fleet's secret is refused (403) and reaches no worker", async () => {
      const { leader, follower } = await relayingPair({ stateRelay: "decisions" });
      const before = heldCount();
      const body = JSON.stringify({ model: "m", prompt: freshPrompt(), max_tokens: 4 });
      const secret = new StateSecret(TEST_STATE_SECRET);
      const other = new StateSecret("another fleet's secret, long enough");
      const attempts: Record<string, string>[] = [
        { "x-radixgate-call": "decide", "x-request-id": "forged-1" },
        {
          "x-radixgate-call": "decide",
          "x-request-id": "forged-2",
          "x-radixgate-peer": signPeerCall(other, "decide", "forged-2"),
        },
        {
          "x-radixgate-call": "decide",
          "x-request-id": "forged-3",
          "x-radixgate-peer": signPeerCall(secret, "decide", "forged-3", Date.now() - 120_000),
        },
        {
          "x-radixgate-call": "decide",
          "x-request-id": "forged-4",
          "x-radixgate-peer": signPeerCall(secret, "complete", "forged-4"),
        },
      ];
      for (const router of [leader, follower]) {
        for (const headers of attempts) {
          const res = await fetch(`${router.url}/v1/completions`, {
            method: "POST",
            headers: { "content-type": "application/json", ...headers },
            body,
          });
          expect(res.status).toBe(403);
          expect(((await res.json()) as { error: { code: string } }).error.code).toBe("forbidden");
        }
      }
      expect(heldCount()).toBe(before);
      // Signed: a decision, an empty answer naming the worker (its key never in it).
      const signed = await fetch(`${leader.url}/v1/completions`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-radixgate-call": "decide",
          "x-request-id": "signed-1",
          "x-radixgate-peer": signPeerCall(secret, "decide", "signed-1"),
        },
        body,
      });
      expect(signed.status).toBe(200);
      expect(signed.headers.get("x-accel-redirect")).toMatch(/^@/);
      expect(signed.headers.get("x-rg-worker")).not.toBeNull();
      expect(signed.headers.get("x-rg-auth")).toBeNull();
      expect(await signed.text()).toBe("");
      expect(inFlight(leader)).toBe(1);
      // Later calls name the exchange by the leader's own key, never by the request id.
      const key = signed.headers.get("x-rg-key") as string;
      expect(key).not.toBe("signed-1");
      const complete = await fetch(`${leader.url}/v1/completions`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-radixgate-call": "complete",
          "x-radixgate-request": key,
          "x-radixgate-peer": signPeerCall(secret, "complete", key),
        },
        body: JSON.stringify({ status: 200, upstream_status: 200, header_ms: 3 }),
      });
      expect(complete.status).toBe(204);
      await waitFor(() => inFlight(leader) === 0, 5000, "the leader's count back to 0");
      expect(heldCount()).toBe(before);
    });

    it("shared state without --state-advertise-url says once at startup that replicas decide apart; with it, nothing", async () => {
      const prefix = `relay-${randomBytes(4).toString("hex")}`;
      const options = {
        workerUrls: workers.map((w) => w.url),
        stateUrl: redis.url,
        stateSecret: TEST_STATE_SECRET,
        stateKeyPrefix: prefix,
      };
      const apart = captureLogs("warn");
      routers.push(await startTestRouter(options, apart.logger));
      const said = (lines: string[]) =>
        lines.filter((l) => l.includes("without --state-advertise-url")).length;
      expect(said(apart.lines)).toBe(1);
      const deferring = captureLogs("warn");
      routers.push(
        await startTestRouter(
          { ...options, stateAdvertiseUrl: "http://127.0.0.1:9" },
          deferring.logger,
        ),
      );
      expect(said(deferring.lines)).toBe(0);
    });

    it("--state-relay decisions: the leader learns which worker holds a Responses answer the follower carried", async () => {
      const { leader, follower } = await relayingPair();
      const before = heldCount();
      const answer = fetch(`${follower.url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", input: freshPrompt(), stream: true }),
      });
      const held = await nextHeld(before);
      const id = `resp_${randomBytes(6).toString("hex")}`;
      const created = { type: "response.created", response: { id, status: "in_progress" } };
      held.res.write(`event: response.created\ndata: ${JSON.stringify(created)}\n\n`);
      held.res.end();
      expect(await (await answer).text()).toContain(id);
      const worker = workerOf(leader, held);
      await waitFor(
        () => leader.context.responseHolders.holder(id) === worker.id,
        5000,
        "the response's holder at the leader",
      );
    });

    it("--state-relay decisions: when no worker can be reached the leader's last answer reaches the client, and nothing is left counted", async () => {
      const deadUrls = [await refusingUrl(), await refusingUrl()];
      const { leader, follower } = await relayingPair({ workerUrls: deadUrls });
      const res = await fetch(`${follower.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt: freshPrompt(), max_tokens: 4 }),
      });
      expect(res.status).toBeGreaterThanOrEqual(502);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toMatch(/upstream_error|no_workers_available/);
      await waitFor(() => inFlight(leader) === 0, 5000, "the leader's count back to 0");
      expect(inFlight(follower)).toBe(0);
      // The first failure was tried again elsewhere, as the leader's own retry loop would.
      expect(
        Number(/} (\d+)/.exec(await metricText(leader, "radixgate_retries_total"))?.[1] ?? 0),
      ).toBeGreaterThanOrEqual(1);
    });
  },
);
