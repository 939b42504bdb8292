// What a tensor's trip between two devices costs, from the durations of one device's receive and
// the ops the other ran meanwhile: no clock is shared between devices, so the profiler sees only
// each device's own spans.
//
// A receive on device B of a value made on device A waits for A's ops after B's last own op, then
// for the transfer: raw = the receive's time less those ops' times. When the first of A's ops
// read a value B had sent it (the programs ping-pong: every op on a remote begins with the
// primary's data), A was still receiving that value when B began to wait, so raw also holds the
// rest of that earlier trip: its transfer time less what B did between starting its send and
// starting this receive (`lead`: the send itself, which is synchronous, then any ops). Such a
// sample measures a round trip, T(B -> A) + T(A -> B) = raw + lead, and no set of durations splits
// a round trip into its two one-way times (that needs a shared clock). Taking raw as the one-way
// time counted each round trip nearly twice: a 196 KB reply of a 0.75-core remote came out at
// 8.3 ms where it took 3.
//
// So every trip over one link (an unordered pair of devices) is priced by one model, symmetric
// in direction: T(n bytes) = a + b n (latency and per-message costs; wire and per-byte CPU), a,
// b >= 0, fitted by least squares to the samples: a round trip of n1 and n2 bytes gives the row
// 2a + (n1 + n2) b = raw + lead, a trip with no earlier one inside it a + n b = raw. Each kind of
// sample (its class and reverse class) enters once, as the median of its values. A link whose
// rows cannot tell a from b (one size both ways) splits its round trips in half.
#pragma once

#include <cstdint>
#include <vector>

namespace huddle::assign {

struct TransferSample {
  int da = -1;        // DA class of the trip received
  double raw_s = 0;   // the receive's time less the other devices' ops meanwhile
  int reverse = -1;   // DA class of the trip B -> A whose rest the wait holds, -1: none
  double lead_s = 0;  // B's time from starting that trip's send to starting this receive
};

// A DA class between devices: its link (an index shared by both directions of a device pair)
// and the bytes of one trip.
struct TripClass {
  int link = -1;  // -1: not between devices (no trip to price)
  std::int64_t bytes = 0;
};

// Per class (classes.size() of them), its trip's seconds under its link's fitted model; -1 for a
// class whose link has no samples or that is not between devices.
std::vector<double> transfer_costs(const std::vector<TransferSample>& samples,
                                   const std::vector<TripClass>& classes);

}  // namespace huddle::assign
