// Which CPUs a process runs on: for devices emulated as processes of one machine
// (`--local-devices`), each pinned to cores of its own as separate devices would be.
#pragma once

#include <vector>

namespace huddle {

// The CPUs this process may run on (its affinity mask), in ascending order; empty if unreadable.
std::vector<int> allowed_cpus();

// The cores of each of `devices` devices of `threads` threads each, taken in order from `cpus`
// (device d gets the d-th `threads` of them); empty when `cpus` has fewer than devices x threads.
std::vector<std::vector<int>> device_cores(const std::vector<int>& cpus, int devices, int threads);

// Pins every thread of this process (each has its own mask; new ones inherit their creator's) to
// `cpus`. Best effort: a thread that ends meanwhile, or a refusal, stays as it was.
void pin_this_process(const std::vector<int>& cpus);

// Pins the calling thread alone (async-signal-safe: for a forked child before exec).
void pin_this_thread(const std::vector<int>& cpus);

}  // namespace huddle
