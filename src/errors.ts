/**
 * The router's own errors, of two kinds.
 *
 * Every error the router itself returns: a stable code, an HTTP status and an OpenAI-shaped body
 * `{"error": {"message", "type", "code"}}`. Upstream errors from workers pass through untouched.
 *
 * Usage errors stop start-up: a flag, its value, a file it names or an address to listen on is
 * wrong. They extend UsageError, which cli.ts reports as one line and exit status 2.
 */
export const ERROR_CATALOG = {
  invalid_json: {
    status: 400,
    type: "invalid_request_error",
    message: "Request body is not valid JSON.",
  },
  invalid_request: { status: 400, type: "invalid_request_error", message: "Invalid request." },
  unauthorized: {
    status: 401,
    type: "authentication_error",
    message: "Missing or invalid API key.",
  },
  forbidden: { status: 403, type: "permission_error", message: "Forbidden." },
  not_found: { status: 404, type: "invalid_request_error", message: "Not found." },
  method_not_allowed: {
    status: 405,
    type: "invalid_request_error",
    message: "Method not allowed.",
  },
  queue_timeout: {
    status: 429,
    type: "server_error",
    message: "Request waited too long in the router's queue; retry later.",
  },
  body_timeout: {
    status: 408,
    type: "invalid_request_error",
    message: "The request body did not arrive in time.",
  },
  // 400, not 409: SGLang's router answers a failed add with 400 and scripts test for it.
  worker_exists: {
    status: 400,
    type: "invalid_request_error",
    message: "Worker already registered.",
  },
  payload_too_large: {
    status: 413,
    type: "invalid_request_error",
    message: "Request body is too large.",
  },
  unsupported_media_type: {
    status: 415,
    type: "invalid_request_error",
    message: "Content-Type must be application/json.",
  },
  too_many_requests: {
    status: 429,
    type: "server_error",
    message: "Router is at capacity; retry later.",
  },
  tenant_quota_exceeded: {
    status: 429,
    type: "rate_limit_error",
    message:
      "The tenant is over its tokens per minute (--tenant-quota); retry after Retry-After seconds.",
  },
  tenant_concurrency_exceeded: {
    status: 429,
    type: "rate_limit_error",
    message:
      "The tenant has its limit of requests under way (--tenant-quota); retry when one ends.",
  },
  internal_error: { status: 500, type: "server_error", message: "Internal router error." },
  upstream_error: { status: 502, type: "server_error", message: "The worker failed to answer." },
  no_workers_available: {
    status: 503,
    type: "server_error",
    message: "No healthy worker is available.",
  },
  body_buffer_full: {
    status: 503,
    type: "server_error",
    message: "The router is buffering its limit of request bodies; retry shortly.",
  },
  large_body_busy: {
    status: 503,
    type: "server_error",
    message: "The router is reading its limit of large request bodies; retry shortly.",
  },
  shutting_down: { status: 503, type: "server_error", message: "Router is shutting down." },
  upstream_timeout: {
    status: 504,
    type: "server_error",
    message: "The worker did not answer in time.",
  },
  model_not_found: {
    status: 404,
    type: "invalid_request_error",
    message: "No worker serves this model.",
  },
  worker_not_found: { status: 404, type: "invalid_request_error", message: "No such worker." },
  response_not_found: {
    status: 404,
    type: "invalid_request_error",
    message: "No such response.",
  },
  invalid_worker_url: {
    status: 400,
    type: "invalid_request_error",
    message: "Invalid worker URL.",
  },
  // --lora-load-on-demand (workers/lora-loader.ts).
  lora_load_failed: {
    status: 502,
    type: "server_error",
    message: "The worker refused to load the LoRA adapter.",
  },
  lora_load_timeout: {
    status: 504,
    type: "server_error",
    message: "Loading the LoRA adapter took longer than --lora-load-timeout-secs.",
  },
  lora_loads_busy: {
    status: 503,
    type: "server_error",
    message: "Too many LoRA adapter loads are under way; retry shortly.",
  },
  loop_detected: {
    status: 508,
    type: "server_error",
    message: "Request loop: the request already passed through this router.",
  },
} as const satisfies Record<string, { status: number; type: string; message: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

export interface ErrorBody {
  error: { message: string; type: string; code: ErrorCode };
}

/** An error the router answers with, carrying its catalog code. */
export class RouterError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string = ERROR_CATALOG[code].message,
    /** Sent as Retry-After (seconds) with the answer: when the client may try again. */
    readonly retryAfterSecs?: number,
  ) {
    super(message);
    this.name = "RouterError";
    this.status = ERROR_CATALOG[code].status;
  }

  toBody(): ErrorBody {
    return errorBody(this.code, this.message);
  }
}

/**
 * A wait in ms as the seconds of a Retry-After header (the router's own refusals and its 503 when
 * every worker is cooling down): whole seconds rounded up, at least 1 (0 would ask for a retry at
 * once), at most `maxSecs`.
 */
export function retryAfterSecs(ms: number, maxSecs = Number.POSITIVE_INFINITY): number {
  return Math.min(maxSecs, Math.max(1, Math.ceil(ms / 1000)));
}

export function errorBody(
  code: ErrorCode,
  message: string = ERROR_CATALOG[code].message,
): ErrorBody {
  return { error: { message, type: ERROR_CATALOG[code].type, code } };
}

/**
 * A mistake in how the router was started; `flag` names the flag to fix, and the message is the
 * whole line the operator reads (cli.ts prints it and exits 2).
 */
export class UsageError extends Error {
  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(message);
    this.name = "UsageError";
  }
}

/** Raised for any invalid setting; `flag` names the command-line flag so the message points at it. */
export class ConfigError extends UsageError {
  constructor(flag: string, message: string) {
    super(flag, `${flag} ${message}`);
    this.name = "ConfigError";
  }
}
