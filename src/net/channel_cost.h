// What moving bytes through a SecureChannel costs this machine's CPU: the figure the cost model
// charges a device per byte of a collective (`huddle profile`'s comm_cpu_ns_per_byte).
#pragma once

#include <cstddef>

namespace huddle::net {

// CPU seconds per byte moved, averaged over the bytes sent and received, for messages of `bytes`,
// measured here over about `budget_s` of CPU: two SecureChannels over a loopback TCP connection,
// one thread sending and one receiving, timed by the process's CPU clock, so sealing, opening,
// the framing's copies and the kernel's TCP work (syscalls, socket buffers) all count, as they
// do on a device. Where no loopback connection can be made (a network namespace without `lo`),
// falls back to sealing and opening frames in memory with a copy each way for the kernel
// (which misses the kernel's work: about half of it on the machines measured).
double measure_channel_cpu_s_per_byte(std::size_t bytes, double budget_s);

}  // namespace huddle::net
