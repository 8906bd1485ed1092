import { ConfigError } from "../errors.js";
import type { Logger } from "../logger.js";
import { readBoundedSync, WatchedFile } from "../watched-file/watched-file.js";
import {
  MAX_QUOTA_FILE_BYTES,
  parseQuotaFile,
  QUOTA_FILE_MODULE,
  type QuotaTable,
} from "./quota-file.js";

/**
 * The --tenant-quota file: read once at start (a bad one refuses to start, naming the line and
 * key), then watched as --worker-file is (watched-file/watched-file.ts): a bad version later is
 * logged and the last good one stands.
 */
export class QuotaFileSource {
  private readonly file: WatchedFile<QuotaTable>;
  readonly initial: QuotaTable;

  constructor(
    path: string,
    apply: (table: QuotaTable) => void,
    logger: Logger,
    onReload: (outcome: "applied" | "rejected") => void = () => {},
  ) {
    let text: string;
    try {
      text = readBoundedSync(path, MAX_QUOTA_FILE_BYTES);
      this.initial = parseQuotaFile(text, path);
    } catch (err) {
      throw new ConfigError("--tenant-quota", `${path}: ${(err as Error).message}`);
    }
    this.file = new WatchedFile(
      {
        path,
        maxBytes: MAX_QUOTA_FILE_BYTES,
        what: "tenant quota file",
        logger,
        parser: { module: QUOTA_FILE_MODULE, name: parseQuotaFile.name },
        apply: (table) => {
          apply(table);
          onReload("applied");
          logger.info(
            { path, tenants: table.tenants.size, others: table.others !== undefined },
            "tenant quota file applied",
          );
        },
        rejected: (reason) => {
          onReload("rejected");
          logger.error({ path, reason }, "tenant quota file ignored: the last good version stands");
        },
      },
      text,
    );
  }

  start(): void {
    this.file.watch();
  }

  stop(): void {
    this.file.stop();
  }

  /** Reads the file now and applies it if it changed and is good (what a change event leads to). */
  reload(): Promise<void> {
    return this.file.reload();
  }
}
