// The setup half of the session protocol between a primary and its workers (the step half is in
// session.h). Over the control channel the primary opened (net::open_session):
//   1. primary -> worker  kSetupTag: JSON {"rank", "world", "session_id", "endpoints": [...],
//      "config": config.json text, "tensors": [canonical names], "digests": {canonical name:
//      tensor_digest of the tensor as the primary loaded it (runtime/fingerprint.h)},
//      optional "weight_dtype", "plan": {...}, "timeout_ms", "trace"}
//   2. mesh: the primary opens a session link (net::open_link, rank 0) to every worker; each
//      worker opens links to the workers of lower rank and takes those of higher rank: one
//      persistent channel per pair. The control channel stays open, idle, until the end;
//   3. worker -> primary kWeightsTag: JSON {"local": true} when it maps the weights from its own
//      copy of the model (`huddle worker --model DIR`): it reads only the tensors its program
//      uses, loaded with the setup's "weight_dtype", and each one's digest equals the setup's;
//      else {"local": false}, and then primary -> worker: the program's weights, one tensor
//      each (collectives::send_tensor), in the order of the program's weight values;
//   4. worker -> primary kReadyTag: JSON {"weight_bytes", "rss_bytes"};
//      (an imported CNN, setup "format": "onnx" and the file's "fingerprint" instead of
//      "config", "tensors" and "digests": the model file instead, kModelFileTag);
//   5. steps (session.h) until kEndTag; then the worker sends kTraceTag with its op spans when
//      the setup asked for a trace.
#pragma once

#include <cstdint>

namespace huddle {

inline constexpr std::uint32_t kSetupTag = 0x10000010u;
inline constexpr std::uint32_t kReadyTag = 0x10000011u;
inline constexpr std::uint32_t kTraceTag = 0x10000012u;
inline constexpr std::uint32_t kWeightsTag = 0x10000013u;
// A profiling session instead of an inference one (runtime/profile_session.h).
inline constexpr std::uint32_t kProfileTag = 0x10000014u;
// Imported CNNs ("format": "onnx" in the setup, no "config" or "tensors"): instead of weights,
// the primary sends the model file, one message, to a worker without a matching copy.
inline constexpr std::uint32_t kModelFileTag = 0x10000017u;
inline constexpr std::uint32_t kProfileCommandTag = 0x10000015u;
inline constexpr std::uint32_t kProfileReplyTag = 0x10000016u;

}  // namespace huddle
