#include "runtime/transfer_estimate.h"

#include "core/error.h"
#include "core/statistics.h"
#include "runtime/run_overhead_fit.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <utility>

namespace huddle::assign {

std::vector<double> transfer_costs(const std::vector<TransferSample>& samples,
                                   const std::vector<TripClass>& classes) {
  const auto num = static_cast<int>(classes.size());
  // Per link, per kind of sample (class, reverse class): its seconds (raw + lead for a round trip).
  std::map<int, std::map<std::pair<int, int>, std::vector<double>>> by_link;
  for (const TransferSample& s : samples) {
    HUDDLE_CHECK(s.da >= 0 && s.da < num, "transfer sample of class {} of {}", s.da, num);
    HUDDLE_CHECK(s.reverse < num, "reverse class {} of {}", s.reverse, num);
    const TripClass& c = classes[static_cast<std::size_t>(s.da)];
    HUDDLE_CHECK(c.link >= 0, "transfer sample of class {}, which joins no two devices", s.da);
    const bool round_trip =
        s.reverse >= 0 && classes[static_cast<std::size_t>(s.reverse)].link == c.link;
    by_link[c.link][{s.da, round_trip ? s.reverse : -1}].push_back(round_trip ? s.raw_s + s.lead_s
                                                                              : s.raw_s);
  }
  std::map<int, std::pair<double, double>> model;  // link -> (a s, b s/MB)
  for (const auto& [link, kinds] : by_link) {
    std::vector<std::vector<double>> rows;
    std::vector<double> seconds;
    for (const auto& [kind, values] : kinds) {
      const auto [da, reverse] = kind;
      const auto bytes = [&](int c) {  // in MB, to keep the two columns of one scale
        return static_cast<double>(classes[static_cast<std::size_t>(c)].bytes) * 1e-6;
      };
      rows.push_back(reverse < 0 ? std::vector<double>{1.0, bytes(da)}
                                 : std::vector<double>{2.0, bytes(da) + bytes(reverse)});
      seconds.push_back(std::max(0.0, median(values)));
    }
    const std::vector<double> x = nonneg_least_squares(rows, seconds);
    model[link] = {x[0], x[1]};
  }
  std::vector<double> costs(classes.size(), -1.0);
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const auto it = model.find(classes[c].link);
    if (classes[c].link >= 0 && it != model.end()) {
      costs[c] =
          it->second.first + it->second.second * static_cast<double>(classes[c].bytes) * 1e-6;
    }
  }
  return costs;
}

}  // namespace huddle::assign
