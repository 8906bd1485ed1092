/**
 * The engines' runtime LoRA routes, as each answers them:
 *
 * vLLM (served only with VLLM_ALLOW_RUNTIME_LORA_UPDATING, else FastAPI's 404:
 * vllm/entrypoints/serve/lora/api_router.py; checks and texts in
 * vllm/entrypoints/openai/models/serving.py, OpenAIServingModels):
 * - POST /v1/load_lora_adapter `{lora_name, lora_path, load_inplace?}`: 200 and the plain text
 *   "Success: LoRA adapter '<name>' added successfully."; 400 `InvalidUserInput` when a field is
 *   missing or the name is already loaded (unless load_inplace); the adapter is listed on /v1/models
 *   from then on, and preloaded (add_lora), which takes the load's time.
 * - POST /v1/unload_lora_adapter `{lora_name}`: 200 "Success: LoRA adapter '<name>' removed
 *   successfully."; 404 `NotFoundError` "The lora adapter '<name>' cannot be found.".
 *   Errors are `{"error": {"message", "type", "param", "code"}}`.
 *
 * SGLang (python/sglang/srt/entrypoints/http_server.py load_lora_adapter / unload_lora_adapter;
 * tokenizer_manager.py; lora/lora_registry.py): the answer is LoRAUpdateOutput
 * `{success, error_message, loaded_adapters}`, 200 on success, else 400:
 * - POST /load_lora_adapter `{lora_name, lora_path, pinned?}`: refused once `--max-loaded-loras`
 *   adapters are registered ("Cannot load LoRA adapter ... Maximum number of loaded LoRA adapters
 *   is N. Please unload some LoRA adapters before loading new ones."), or when the name exists
 *   ("LoRA with name <name> already exists. ...").
 * - POST /unload_lora_adapter `{lora_name}`: the name is unregistered at once (new requests for it
 *   are refused), and the answer waits until the requests using it have finished
 *   (LoRARegistry.wait_for_unload); an unknown name: "LoRA with name <name> does not exist. ...".
 */
import type { LoraSlots } from "./lora-slots.js";
import type { SimFlavor } from "./options.js";

export type LoraAdminPath =
  | "/v1/load_lora_adapter"
  | "/v1/unload_lora_adapter"
  | "/load_lora_adapter"
  | "/unload_lora_adapter";

export const LORA_ADMIN_PATHS: ReadonlySet<string> = new Set<LoraAdminPath>([
  "/v1/load_lora_adapter",
  "/v1/unload_lora_adapter",
  "/load_lora_adapter",
  "/unload_lora_adapter",
]);

export interface LoraAdminAnswer {
  readonly status: number;
  /** A JSON body, or plain text (vLLM's success). */
  readonly body: unknown;
  readonly text?: boolean;
}

export interface LoraAdminState {
  readonly flavor: SimFlavor;
  /** vLLM: VLLM_ALLOW_RUNTIME_LORA_UPDATING. */
  readonly runtimeUpdates: boolean;
  /** SGLang --max-loaded-loras; undefined = no bound. */
  readonly maxLoadedLoras: number | undefined;
  /** Adapters served now, name → path (what /v1/models lists). */
  readonly adapters: Map<string, string>;
  /** The adapter slots, when the engine keeps fewer loaded than it lists. */
  readonly slots: LoraSlots | undefined;
  /** Real ms a load takes without slots (the weights read from disk). */
  readonly loadMs: number;
}

/** undefined: the flavor does not serve that path (FastAPI's 404). */
export async function loraAdmin(
  state: LoraAdminState,
  path: LoraAdminPath,
  body: unknown,
): Promise<LoraAdminAnswer | undefined> {
  const vllmPath = path.startsWith("/v1/");
  if (vllmPath !== (state.flavor === "vllm")) return undefined;
  if (vllmPath && !state.runtimeUpdates) return undefined;
  const b = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const name = typeof b.lora_name === "string" ? b.lora_name : "";
  const loraPath = typeof b.lora_path === "string" ? b.lora_path : "";
  const load = path.endsWith("/load_lora_adapter");
  return vllmPath
    ? vllmAnswer(state, load, name, loraPath, b.load_inplace === true)
    : sglangAnswer(state, load, name, loraPath);
}

async function vllmAnswer(
  state: LoraAdminState,
  load: boolean,
  name: string,
  loraPath: string,
  inplace: boolean,
): Promise<LoraAdminAnswer> {
  if (load) {
    if (name === "" || loraPath === "")
      return vllmError(
        400,
        "InvalidUserInput",
        "Both 'lora_name' and 'lora_path' must be provided.",
      );
    if (!inplace && state.adapters.has(name)) {
      return vllmError(
        400,
        "InvalidUserInput",
        `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`,
      );
    }
    await preload(state, name);
    state.adapters.set(name, loraPath);
    return { status: 200, body: `Success: LoRA adapter '${name}' added successfully.`, text: true };
  }
  if (name === "")
    return vllmError(
      400,
      "InvalidUserInput",
      "'lora_name' needs to be provided to unload a LoRA adapter.",
    );
  if (!state.adapters.has(name))
    return vllmError(404, "NotFoundError", `The lora adapter '${name}' cannot be found.`);
  state.adapters.delete(name);
  return { status: 200, body: `Success: LoRA adapter '${name}' removed successfully.`, text: true };
}

async function sglangAnswer(
  state: LoraAdminState,
  load: boolean,
  name: string,
  loraPath: string,
): Promise<LoraAdminAnswer> {
  const keys = `dict_keys([${[...state.adapters.keys()].map((k) => `'${k}'`).join(", ")}])`;
  if (load) {
    const max = state.maxLoadedLoras;
    if (max !== undefined && state.adapters.size >= max) {
      return sglangFailure(
        `Cannot load LoRA adapter ${name} at path ${loraPath}. Maximum number of loaded LoRA adapters is ${max}. Please unload some LoRA adapters before loading new ones.`,
      );
    }
    if (state.adapters.has(name))
      return sglangFailure(`LoRA with name ${name} already exists. Loaded LoRAs: ${keys}`);
    await preload(state, name);
    state.adapters.set(name, loraPath);
    return { status: 200, body: sglangSuccess(state) };
  }
  if (!state.adapters.has(name))
    return sglangFailure(`LoRA with name ${name} does not exist. Loaded LoRAs: ${keys}`);
  state.adapters.delete(name);
  await state.slots?.idle(name);
  state.slots?.drop(name);
  return { status: 200, body: sglangSuccess(state) };
}

/** The load's time: into a slot when the engine has slots, else the weights read. */
async function preload(state: LoraAdminState, name: string): Promise<void> {
  if (state.slots !== undefined) {
    (await state.slots.acquire(name))();
    return;
  }
  if (state.loadMs > 0) await new Promise((r) => setTimeout(r, state.loadMs));
}

function vllmError(status: number, type: string, message: string): LoraAdminAnswer {
  return { status, body: { error: { message, type, param: null, code: status } } };
}

function sglangFailure(message: string): LoraAdminAnswer {
  return { status: 400, body: { success: false, error_message: message, loaded_adapters: null } };
}

function sglangSuccess(state: LoraAdminState) {
  return {
    success: true,
    error_message: null,
    loaded_adapters: Object.fromEntries(state.adapters),
  };
}
