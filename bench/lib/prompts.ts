import { type Rng, randomInt as randInt } from "../../sim/prng.js";

/**
 * Seeded generator of realistic chat prompts, mostly ASCII words: a few shared system prompts,
 * growing multi-turn conversations (each turn = the whole history + new text) and unique prompts.
 */

const WORDS = (
  "the of and to in is you that it for was on are as with be at this have from or one had by " +
  "but not what all were we when your can said there use an each which she do how their if will " +
  "up other about out many then them these so some her would make like him into time has look " +
  "two more write go see number no way could people my than first water been call who oil its " +
  "now find long down day did get come made may part model request server cache token prompt " +
  "answer question system user assistant please explain function return value error context " +
  "summary example data table result should must never always because before after between " +
  "through during without within against among however therefore although"
).split(" ");

/** Two-byte text for the worst realistic case (V8 stores it at 2 bytes a character). */
const CJK_WORDS = (
  "我们 你们 他们 模型 请求 服务器 缓存 问题 回答 系统 用户 助手 解释 函数 返回 错误 上下文 " +
  "总结 例子 数据 表格 结果 因为 之前 之后 然而 因此 虽然 今天 明天 时间 工作 学习 东京 北京 " +
  "こんにちは ありがとう システム ユーザー 질문 답변 시스템"
).split(" ");

const PUNCTUATION = [". ", ", ", "? ", ".\n", ": ", "; "];

/** Which words prompts are made of. */
export type Script = "ascii" | "cjk";

/** About `chars` characters of word text (exactly `chars`, cut at the end). */
export function words(rng: Rng, chars: number, script: Script = "ascii"): string {
  const list = script === "cjk" ? CJK_WORDS : WORDS;
  const parts: string[] = [];
  let length = 0;
  while (length < chars) {
    const w = list[randInt(rng, list.length)]!;
    const sep = rng() < 0.12 ? PUNCTUATION[randInt(rng, PUNCTUATION.length)]! : " ";
    parts.push(w, sep);
    length += w.length + sep.length;
  }
  return parts.join("").slice(0, chars);
}

/** A flat copy, as a request text parsed from a JSON body would be (not a V8 cons/sliced string). */
export function flat(s: string): string {
  return s.length < 13 ? s : [s.slice(0, 1), s.slice(1)].join("");
}

interface Conversation {
  history: string;
  script: Script;
}

export interface WorkloadOptions {
  /** Target prompt size in characters. */
  promptChars: number;
  /** Shared system prompts to draw from. */
  systemPrompts?: number;
  /** Conversations open at once. */
  liveConversations?: number;
  /** Words used for every prompt (default "ascii"). */
  script?: Script;
  /**
   * Share of conversations and unique texts written in CJK instead (default 0): real traffic mixes
   * one-byte and two-byte strings, which V8's compiled code then has to handle both of.
   */
  cjkShare?: number;
}

/**
 * Request mix: 50% a turn of a live conversation (system prompt of promptChars/4, then turns of
 * promptChars/8 until the history passes promptChars, when the conversation is replaced), 25% a
 * shared system prompt + a unique question (promptChars in all), 25% a unique prompt.
 */
export class Workload {
  private readonly rng: Rng;
  private readonly size: number;
  private readonly systems: string[];
  private readonly conversations: Conversation[];
  private readonly script: Script;
  private readonly cjkShare: number;

  constructor(rng: Rng, options: WorkloadOptions) {
    this.rng = rng;
    this.size = options.promptChars;
    this.script = options.script ?? "ascii";
    this.cjkShare = options.cjkShare ?? 0;
    const sysChars = Math.floor(this.size / 4);
    this.systems = Array.from(
      { length: options.systemPrompts ?? 8 },
      (_, i) => `System prompt ${i}: ${words(rng, sysChars, this.script)}\n`,
    );
    this.conversations = Array.from({ length: options.liveConversations ?? 64 }, () =>
      this.newConversation(),
    );
  }

  private pickScript(): Script {
    return this.rng() < this.cjkShare ? "cjk" : this.script;
  }

  private newConversation(): Conversation {
    const history = this.systems[randInt(this.rng, this.systems.length)]!;
    return { history, script: this.pickScript() };
  }

  /** The next request's routing text (flat). */
  next(): string {
    const r = this.rng();
    if (r < 0.5) {
      const i = randInt(this.rng, this.conversations.length);
      let convo = this.conversations[i]!;
      if (convo.history.length + this.size / 8 > this.size) {
        convo = this.newConversation();
        this.conversations[i] = convo;
      }
      const turn = words(this.rng, Math.floor(this.size / 8), convo.script);
      const text = flat(`${convo.history}\nuser: ${turn}`);
      // The assistant's reply becomes part of the next turn's prompt.
      const reply = words(this.rng, Math.floor(this.size / 16), convo.script);
      convo.history = flat(`${text}\nassistant: ${reply}`);
      return text;
    }
    if (r < 0.75) {
      const sys = this.systems[randInt(this.rng, this.systems.length)]!;
      return flat(sys + words(this.rng, this.size - sys.length, this.pickScript()));
    }
    return flat(words(this.rng, this.size, this.pickScript()));
  }
}
