import { describe, expect, it } from "vitest";
import { isSecretField, withoutSecrets } from "../../src/engines/secret-fields.js";

describe("secret fields of an engine's info answer", () => {
  it.each([
    "api_key",
    "admin_api_key",
    "ssl_keyfile",
    "ssl_keyfile_password",
    "hf_token",
    "apiKey",
    "x-auth",
    "client_secret",
    "Authorization",
  ])("%s is secret", (name) => {
    expect(isSecretField(name)).toBe(true);
  });

  it.each([
    "max_total_num_tokens",
    "tokenizer_path",
    "skip_tokenizer_init",
    "max_prefill_tokens",
    "model_path",
    "page_size",
    "dp_size",
    "ssl_certfile",
    "enable_cache_report",
  ])("%s is kept (the router and its clients read it)", (name) => {
    expect(isSecretField(name)).toBe(false);
  });

  it("removes secret fields at any depth, keeps the rest, and leaves the input as it was", () => {
    const info = {
      model_path: "m",
      api_key: "sk-worker",
      max_total_num_tokens: 1000,
      internal_states: [{ admin_api_key: "sk-admin", effective_max_running_requests_per_dp: 8 }],
      nested: { deeper: { password: "p", kept: 1 } },
    };
    expect(withoutSecrets(info)).toEqual({
      model_path: "m",
      max_total_num_tokens: 1000,
      internal_states: [{ effective_max_running_requests_per_dp: 8 }],
      nested: { deeper: { kept: 1 } },
    });
    expect(info.api_key).toBe("sk-worker");
  });

  it("hides the credentials of a URL inside any string", () => {
    expect(
      withoutSecrets({ hicache_storage_backend_extra_config: '{"url":"redis://u:pw@h:6379/0"}' }),
    ).toEqual({ hicache_storage_backend_extra_config: '{"url":"redis://***@h:6379/0"}' });
  });

  it("cuts nesting deeper than an info answer ever has", () => {
    let deep: unknown = { api_key: "sk" };
    for (let i = 0; i < 100; i++) deep = { a: deep };
    expect(JSON.stringify(withoutSecrets(deep))).not.toContain("sk");
  });
});
