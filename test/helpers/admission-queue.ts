import { AdmissionQueue, type AdmissionQueueOptions } from "../../src/admission/admission-queue.js";

/**
 * An admission queue for the tests: no concurrency limit, room for 100 waiting (100 a tenant),
 * not holding for saturation unless `options` say so.
 */
export function testQueue(
  options: Partial<AdmissionQueueOptions> & Pick<AdmissionQueueOptions, "thresholds">,
): AdmissionQueue {
  return new AdmissionQueue({
    maxConcurrent: 0,
    queueSize: 100,
    maxQueuedPerTenant: 100,
    queueWhenSaturated: false,
    ...options,
  });
}
