#include "runtime/run_overhead_fit.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace huddle::assign {

std::vector<double> nonneg_least_squares(const std::vector<std::vector<double>>& rows,
                                         std::span<const double> b) {
  HUDDLE_CHECK(rows.size() == b.size());
  const std::size_t columns = rows.empty() ? 0 : rows[0].size();
  for (const auto& row : rows) HUDDLE_CHECK(row.size() == columns);
  std::vector<double> x(columns, 0.0);
  std::vector<bool> free(columns, false);
  for (std::size_t c = 0; c < columns; ++c) {
    for (const auto& row : rows) free[c] = free[c] || row[c] != 0;
  }
  // Least squares on the free columns; a negative value pins its column to 0 and the rest refit
  // (an active-set NNLS). The system is one unknown per device and per remote, a handful: its
  // normal equations are solved here rather than through LAPACK, which nothing else needs.
  for (std::size_t round = 0; round <= columns; ++round) {
    std::vector<std::size_t> cols;
    for (std::size_t c = 0; c < columns; ++c) {
      if (free[c]) cols.push_back(c);
    }
    const std::size_t k = cols.size();
    if (k == 0) break;
    std::vector<std::vector<double>> m(k, std::vector<double>(k + 1, 0.0));  // [AtA | Atb]
    for (std::size_t r = 0; r < b.size(); ++r) {
      for (std::size_t i = 0; i < k; ++i) {
        for (std::size_t j = 0; j < k; ++j) m[i][j] += rows[r][cols[i]] * rows[r][cols[j]];
        m[i][k] += rows[r][cols[i]] * b[r];
      }
    }
    // A column is spanned by the earlier ones when what is left of it after eliminating them is
    // rounding noise against its own size (relative, as counts and 0/1 columns mix).
    std::vector<double> tolerance(k);
    for (std::size_t i = 0; i < k; ++i) tolerance[i] = 1e-9 * m[i][i];
    std::vector<bool> spanned(k, false);
    for (std::size_t i = 0; i < k; ++i) {  // Gauss-Jordan with partial pivoting
      std::size_t pivot = i;
      for (std::size_t j = i + 1; j < k; ++j) {
        if (std::abs(m[j][i]) > std::abs(m[pivot][i])) pivot = j;
      }
      std::swap(m[i], m[pivot]);
      if (std::abs(m[i][i]) <= tolerance[i]) {  // collinear: this column's value stays 0
        spanned[i] = true;
        continue;
      }
      for (std::size_t j = 0; j < k; ++j) {
        if (j == i) continue;
        const double f = m[j][i] / m[i][i];
        for (std::size_t c = i; c <= k; ++c) m[j][c] -= f * m[i][c];
      }
    }
    std::size_t most_negative = k;
    for (std::size_t i = 0; i < k; ++i) {
      x[cols[i]] = spanned[i] ? 0.0 : m[i][k] / m[i][i];
      if (x[cols[i]] < 0 && (most_negative == k || x[cols[i]] < x[cols[most_negative]]))
        most_negative = i;
    }
    if (most_negative == k) break;
    free[cols[most_negative]] = false;
    x[cols[most_negative]] = 0;
  }
  for (double& v : x) v = std::max(0.0, v);
  return x;
}

std::vector<double> fit_op_overheads(const std::vector<std::vector<double>>& ops_on,
                                     std::span<const double> gaps) {
  return nonneg_least_squares(ops_on, gaps);
}

std::vector<std::vector<double>> ops_per_device(const std::vector<Assignment>& runs,
                                                const std::vector<int>& provider_device,
                                                std::size_t devices) {
  std::vector<std::vector<double>> ops_on(runs.size(), std::vector<double>(devices, 0.0));
  for (std::size_t r = 0; r < runs.size(); ++r) {
    for (const int p : runs[r]) ops_on[r][at(provider_device[at(p)])] += 1;
  }
  return ops_on;
}

std::vector<bool> fixed_cost_identifiable(const std::vector<std::vector<double>>& ops_on) {
  const std::size_t devices = ops_on.empty() ? 0 : ops_on[0].size();
  std::vector<bool> out(devices, false);
  for (std::size_t d = 1; d < devices; ++d) {
    const auto uses = [d](const std::vector<double>& row) { return row[d] > 0; };
    out[d] = std::any_of(ops_on.begin(), ops_on.end(), uses) &&
             !std::all_of(ops_on.begin(), ops_on.end(), uses);
  }
  return out;
}

RunOverheads fit_run_overheads(const std::vector<std::vector<double>>& ops_on,
                               std::span<const double> gaps) {
  const std::size_t devices = ops_on.empty() ? 0 : ops_on[0].size();
  RunOverheads out;
  out.fixed.assign(devices, 0.0);
  out.identified = fixed_cost_identifiable(ops_on);
  std::vector<std::size_t> indicators;  // devices with a fixed-cost column
  for (std::size_t d = 1; d < devices; ++d) {
    if (out.identified[d]) indicators.push_back(d);
  }
  std::vector<std::vector<double>> rows = ops_on;
  for (std::vector<double>& row : rows) {
    const std::vector<double> counts = row;
    for (std::size_t d : indicators) row.push_back(counts[d] > 0 ? 1.0 : 0.0);
  }
  const std::vector<double> x = nonneg_least_squares(rows, gaps);
  out.per_op.assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(devices));
  for (std::size_t i = 0; i < indicators.size(); ++i) out.fixed[indicators[i]] = x[devices + i];
  return out;
}

}  // namespace huddle::assign
