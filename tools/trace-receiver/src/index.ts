export { decodeOtlpJson } from "./decode-otlp-json.js";
export { formatSpanTree } from "./format-span-tree.js";
export { type OtlpReceiver, type OtlpReceiverOptions, startOtlpReceiver } from "./otlp-receiver.js";
export {
  type Attributes,
  type AttributeValue,
  type ReceivedEvent,
  type ReceivedSpan,
  SPAN_KIND,
} from "./received-span.js";
