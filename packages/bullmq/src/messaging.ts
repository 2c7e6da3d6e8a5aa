import type { Attributes } from "@opentelemetry/api";

/** The `messaging.*` names of OpenTelemetry's semantic conventions that BullMQ's spans carry. */
const ATTR_MESSAGING_SYSTEM = "messaging.system";
const ATTR_MESSAGING_OPERATION_TYPE = "messaging.operation.type";
const ATTR_MESSAGING_DESTINATION_NAME = "messaging.destination.name";
export const ATTR_MESSAGING_MESSAGE_ID = "messaging.message.id";

/** The dispatcher's metric names. */
export const METRIC_DISPATCHER_TIMEOUTS = "once.dispatcher.timeouts";
export const METRIC_DISPATCHER_REENQUEUES = "once.dispatcher.reenqueues";

/** Attributes of a BullMQ consumer span. */
export function consumerAttributes(queue: string, jobId: string | undefined): Attributes {
  return {
    [ATTR_MESSAGING_SYSTEM]: "bullmq",
    [ATTR_MESSAGING_OPERATION_TYPE]: "process",
    [ATTR_MESSAGING_DESTINATION_NAME]: queue,
    ...(jobId === undefined ? {} : { [ATTR_MESSAGING_MESSAGE_ID]: jobId }),
  };
}

/** Attributes of a BullMQ producer span. */
export function producerAttributes(queue: string): Attributes {
  return {
    [ATTR_MESSAGING_SYSTEM]: "bullmq",
    [ATTR_MESSAGING_OPERATION_TYPE]: "send",
    [ATTR_MESSAGING_DESTINATION_NAME]: queue,
  };
}
