import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { RouterError } from "../../src/errors.js";
import {
  adapterOf,
  MAX_NESTING_DEPTH,
  mediaDigest,
  modelOf,
  routingText,
} from "../../src/intake/routing-text.js";

/** `[[[ ... [inner] ... ]]]`, `depth` arrays deep, built without recursion. */
function nested(depth: number, inner: unknown = 1): unknown {
  let value: unknown = inner;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

const TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city.",
    parameters: { type: "object", properties: { city: { type: "string" } } },
  },
};

describe("routingText", () => {
  it("chat: every message's content in order, not just the first (SGLang router regression)", () => {
    const text = routingText("chat", {
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello." },
        { role: "tool", content: "42" },
        { role: "user", content: "Again" },
      ],
    });
    for (const part of ["You are terse.", "Hi", "Hello.", "42", "Again"])
      expect(text).toContain(part);
    expect(text.indexOf("You are terse.")).toBeLessThan(text.indexOf("Hi"));
    expect(text.indexOf("Hello.")).toBeLessThan(text.indexOf("Again"));
  });

  it("chat: the text parts of multi-part content, skipping images", () => {
    const text = routingText("chat", {
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Describe " },
            { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
            { type: "text", text: "this picture" },
          ],
        },
      ],
    });
    expect(text).toContain("Describe this picture");
    expect(text).not.toContain("base64");
  });

  it("chat: a growing conversation keeps its earlier routing text as a prefix", () => {
    const turn1 = [
      { role: "system", content: "sys" },
      { role: "user", content: "q1" },
    ];
    const turn2 = [...turn1, { role: "assistant", content: "a1" }, { role: "user", content: "q2" }];
    expect(
      routingText("chat", { messages: turn2 }).startsWith(routingText("chat", { messages: turn1 })),
    ).toBe(true);
  });

  it("chat: message boundaries matter (['ab','c'] differs from ['a','bc'])", () => {
    const a = routingText("chat", {
      messages: [
        { role: "user", content: "ab" },
        { role: "user", content: "c" },
      ],
    });
    const b = routingText("chat", {
      messages: [
        { role: "user", content: "a" },
        { role: "user", content: "bc" },
      ],
    });
    expect(a).not.toBe(b);
  });

  it("chat: tool calls of assistant messages count", () => {
    const text = routingText("chat", {
      messages: [
        {
          role: "assistant",
          content: null,
          tool_calls: [{ function: { name: "lookup", arguments: '{"q":1}' } }],
        },
      ],
    });
    expect(text).toContain('lookup({"q":1})');
  });

  it("completions: prompt as a string or an array", () => {
    expect(routingText("completions", { prompt: "Once upon" })).toBe("Once upon");
    expect(routingText("completions", { prompt: ["a", "b"] })).toBe("a\nb\n");
    expect(routingText("completions", { prompt: [1, 23] })).toBe("1,23,");
  });

  it("token ids never prefix-collide: [1, 2] is not a prefix of [1, 23]", () => {
    expect(
      routingText("completions", { prompt: [1, 23] }).startsWith(
        routingText("completions", { prompt: [1, 2] }),
      ),
    ).toBe(false);
  });

  it("generate: text, else input_ids", () => {
    expect(routingText("generate", { text: "The capital of France" })).toBe(
      "The capital of France",
    );
    expect(routingText("generate", { input_ids: [5, 6, 7] })).toBe("5,6,7,");
    expect(routingText("generate", { input_ids: [[5, 6], [7]] })).toBe("5,6,\n7,\n");
  });

  it("embeddings: input as a string or an array", () => {
    expect(routingText("embeddings", { input: "hello" })).toBe("hello");
    expect(routingText("embeddings", { input: ["x", "y"] })).toBe("x\ny\n");
  });

  it("malformed fields give an empty routing text, not an exception", () => {
    expect(routingText("chat", { messages: "nope" })).toBe("");
    expect(routingText("chat", { messages: [null, 3, { content: 5 }] })).toBe("<>\n");
    expect(routingText("completions", { prompt: { a: 1 } })).toBe("");
    expect(routingText("generate", {})).toBe("");
  });

  it("never throws on any JSON object (property)", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("chat", "completions", "generate", "embeddings" as const),
        fc.object(),
        (endpoint, body) => {
          expect(typeof routingText(endpoint as "chat", body as Record<string, unknown>)).toBe(
            "string",
          );
          modelOf(body as Record<string, unknown>);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("never throws on chat bodies with arbitrary message shapes (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.anything()), (messages) => {
        expect(typeof routingText("chat", { messages })).toBe("string");
      }),
      { numRuns: 300 },
    );
  });

  it("token-id batches nested 8,000 levels deep: a 400 invalid_request, not a stack overflow", () => {
    for (const [endpoint, field] of [
      ["completions", "prompt"],
      ["embeddings", "input"],
      ["generate", "input_ids"],
      ["generate", "text"],
    ] as const) {
      const call = () => routingText(endpoint, { [field]: nested(8000) });
      expect(call, field).toThrow(RouterError);
      expect(call, field).toThrow(/nested deeper than/);
      try {
        call();
      } catch (err) {
        expect((err as RouterError).status).toBe(400);
        expect((err as RouterError).code).toBe("invalid_request");
      }
    }
  });

  it("nesting up to MAX_NESTING_DEPTH levels is walked, one level more is refused", () => {
    expect(routingText("completions", { prompt: nested(MAX_NESTING_DEPTH - 1, 7) })).toBe(
      `7,${"\n".repeat(MAX_NESTING_DEPTH - 2)}`,
    );
    expect(() => routingText("completions", { prompt: nested(MAX_NESTING_DEPTH + 1) })).toThrow(
      RouterError,
    );
  });

  it("tools nested 8,000 levels deep: a 400 invalid_request, not a stack overflow", () => {
    let schema: Record<string, unknown> = { type: "string" };
    for (let i = 0; i < 8000; i++) schema = { type: "object", properties: { x: schema } };
    const call = () =>
      routingText("chat", {
        tools: [{ type: "function", function: { name: "f", parameters: schema } }],
        messages: [{ role: "user", content: "hi" }],
      });
    expect(call).toThrow(RouterError);
  });

  it("chat: tool definitions come before the messages (chat templates render them first)", () => {
    const text = routingText("chat", {
      tools: [TOOL],
      messages: [{ role: "user", content: "Weather in Paris?" }],
    });
    expect(text).toContain("get_weather");
    expect(text).toContain("Current weather for a city.");
    expect(text.indexOf("get_weather")).toBeLessThan(text.indexOf("Weather in Paris?"));
  });

  it("chat: same messages with different tools give routing texts that differ from the start", () => {
    const messages = [{ role: "user", content: "Weather in Paris?" }];
    const other = { ...TOOL, function: { ...TOOL.function, name: "book_flight" } };
    const a = routingText("chat", { tools: [TOOL], messages });
    const b = routingText("chat", { tools: [other], messages });
    expect(a).not.toBe(b);
    let common = 0;
    while (common < a.length && a[common] === b[common]) common++;
    expect(common).toBeLessThan(a.indexOf("Weather"));
  });

  it("chat: a conversation with tools keeps its earlier routing text as a prefix", () => {
    const turn1 = [{ role: "user", content: "q1" }];
    const turn2 = [...turn1, { role: "assistant", content: "a1" }, { role: "user", content: "q2" }];
    expect(
      routingText("chat", { tools: [TOOL], messages: turn2 }).startsWith(
        routingText("chat", { tools: [TOOL], messages: turn1 }),
      ),
    ).toBe(true);
  });

  it("chat: no tools (absent or empty) leaves the routing text as before", () => {
    const messages = [{ role: "user", content: "hi" }];
    expect(routingText("chat", { messages, tools: [] })).toBe("<user>hi\n");
    expect(routingText("chat", { messages })).toBe("<user>hi\n");
  });

  it("chat: fields no template renders before the messages do not count (response_format, tool_choice)", () => {
    const messages = [{ role: "user", content: "hi" }];
    expect(
      routingText("chat", {
        messages,
        response_format: { type: "json_object" },
        tool_choice: "auto",
      }),
    ).toBe(routingText("chat", { messages }));
  });

  it("maxChars bounds the routing text and keeps it a prefix of the full one", () => {
    const body = { tools: [TOOL], messages: [{ role: "user", content: "z".repeat(1000) }] };
    const full = routingText("chat", body);
    const short = routingText("chat", body, 100);
    expect(short.length).toBe(100);
    expect(full.startsWith(short)).toBe(true);
    expect(routingText("completions", { prompt: [1, 2, 3, 4] }, 5)).toBe("1,2,3");
  });
});

describe("adapterOf: SGLang's lora_path as one adapter key", () => {
  it("a name, or one name for every item of a batch", () => {
    expect(adapterOf({ lora_path: "sql" })).toBe("sql");
    expect(adapterOf({ lora_path: ["sql", "sql"] })).toBe("sql");
    expect(adapterOf({ lora_path: ["sql"] })).toBe("sql");
  });

  it("no adapter: absent, empty, null for every item, or not SGLang's shape", () => {
    for (const lora_path of [undefined, "", [], [null, null], ["", ""], 7, { a: 1 }, [1, 2]]) {
      expect(adapterOf({ lora_path })).toBeUndefined();
    }
  });

  it("a batch mixing adapters gets a key of its own, apart from each adapter's", () => {
    const mixed = adapterOf({ lora_path: ["sql", null] });
    expect(mixed).toBeDefined();
    expect(mixed).not.toBe("sql");
    expect(adapterOf({ lora_path: [null, "sql"] })).not.toBe(mixed);
  });
});

describe("names that key the index are bounded when the body is parsed too", () => {
  const refused = (f: () => unknown, field: string) => {
    expect(f).toThrow(RouterError);
    expect(f).toThrow(`"${field}"`);
  };

  it("lora_path: a name, or any string of its list, past 4,096 characters", () => {
    const long = "a".repeat(4097);
    expect(adapterOf({ lora_path: "a".repeat(4096) })).toHaveLength(4096);
    for (const lora_path of [long, [long], ["sql", long], [long, 3]]) {
      refused(() => adapterOf({ lora_path }), "lora_path");
    }
  });

  it("model: past a path, a colon and an adapter (8,193 characters)", () => {
    expect(modelOf({ model: "m".repeat(8193) })).toHaveLength(8193);
    refused(() => modelOf({ model: "m".repeat(8194) }), "model");
  });
});

describe("routingText: media parts", () => {
  const png = (bytes: string) => `data:image/png;base64,${Buffer.from(bytes).toString("base64")}`;
  const chat = (url: string, text = "What is in this picture?") =>
    routingText("chat", {
      messages: [
        { role: "system", content: "You describe images." },
        {
          role: "user",
          content: [
            { type: "text", text },
            { type: "image_url", image_url: { url } },
          ],
        },
      ],
    });
  const common = (a: string, b: string) => {
    let i = 0;
    while (i < a.length && a[i] === b[i]) i++;
    return i;
  };

  it("same text, different images: the texts diverge at the image, before the message's text", () => {
    const a = chat(png("image one"));
    const b = chat(png("image two"));
    expect(a).not.toBe(b);
    // The digest stands ahead of the message's text: none of it is shared past the image.
    expect(common(a, b)).toBeLessThan(a.indexOf("What is in this picture?"));
    expect(a.slice(0, common(a, b))).toContain("You describe images.");
  });

  it("the same image matches through it, inline or by the same URL", () => {
    expect(chat(png("image one"), "q1").startsWith(chat(png("image one"), "").slice(0, -1))).toBe(
      true,
    );
    expect(chat(png("image one"))).toBe(chat(png("image one")));
    expect(chat("https://example.com/cat.png")).toBe(chat("https://example.com/cat.png"));
    expect(chat("https://example.com/cat.png")).not.toBe(chat("https://example.com/dog.png"));
  });

  it("digests a data: URL's bytes: the same bytes in another base64 spelling key the same", () => {
    const bytes = Buffer.from("the same pixels, padded");
    const spaced = `data:image/png;base64,${bytes.toString("base64").replace(/=+$/, "")}`;
    expect(mediaDigest({ type: "image_url", image_url: { url: spaced } })).toBe(
      mediaDigest({ type: "image_url", image_url: { url: png("the same pixels, padded") } }),
    );
  });

  it("covers the Responses API's input_image, audio and video parts; text parts are not media", () => {
    const image = { type: "input_image", image_url: png("x") };
    expect(mediaDigest(image)).toMatch(/^[0-9a-f]{24}$/);
    expect(mediaDigest({ type: "input_audio", input_audio: { data: "AAAA", format: "wav" } })).toBe(
      mediaDigest({ type: "input_audio", input_audio: { data: "AAAA", format: "wav" } }),
    );
    expect(mediaDigest({ type: "video_url", video_url: { url: "https://v/1.mp4" } })).toBeDefined();
    expect(mediaDigest({ type: "text", text: "hi" })).toBeUndefined();
    expect(mediaDigest({ type: "image_url" })).toBeUndefined();
    const responses = (url: string) =>
      routingText("responses", {
        input: [
          {
            role: "user",
            content: [
              { type: "input_text", text: "q" },
              { ...image, image_url: url },
            ],
          },
        ],
      });
    expect(responses(png("a"))).not.toBe(responses(png("b")));
  });

  it("a digest never runs past the character bound", () => {
    expect(chat(png("image one")).length).toBeGreaterThan(40);
    const bounded = routingText(
      "chat",
      {
        messages: [
          { role: "user", content: [{ type: "image_url", image_url: { url: png("i") } }] },
        ],
      },
      12,
    );
    expect(bounded).toHaveLength(12);
  });
});

describe("mediaDigest: a data: URL's payload is hashed as text, never decoded", () => {
  const part = (url: string) => ({ type: "image_url", image_url: { url } });

  it("line-wrapped, spaced or padded spellings of one base64 payload key the same; other bytes do not", () => {
    const bytes = Buffer.from("x".repeat(200_000).concat("the end"));
    const b64 = bytes.toString("base64");
    const plain = mediaDigest(part(`data:image/png;base64,${b64}`));
    const wrapped = b64.replace(/.{76}/g, "$&\r\n");
    expect(mediaDigest(part(`data:image/png;base64,${wrapped}`))).toBe(plain);
    expect(mediaDigest(part(`data:image/png;base64,${b64.replace(/=+$/, "")}  \n`))).toBe(plain);
    const other = Buffer.from("x".repeat(200_000).concat("the End")).toString("base64");
    expect(mediaDigest(part(`data:image/png;base64,${other}`))).not.toBe(plain);
  });

  it("a large image costs no decoded copy of itself", () => {
    const url = `data:image/png;base64,${Buffer.alloc(6 * 1024 * 1024, 7).toString("base64")}`;
    const from = vi.spyOn(Buffer, "from");
    try {
      expect(mediaDigest(part(url))).toMatch(/^[0-9a-f]{24}$/);
      const decodes = from.mock.calls.filter((args) => (args as unknown[])[1] === "base64");
      expect(decodes).toEqual([]);
    } finally {
      from.mockRestore();
    }
  });
});
