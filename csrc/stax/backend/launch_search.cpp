#include "stax/backend/launch_search.h"

#include <cctype>
#include <chrono>
#include <exception>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tp::stax {

SearchPoint SearchSpace::default_point() const {
  SearchPoint p;
  for (const SearchParam& q : params) p.push_back(q.values.at(static_cast<size_t>(q.default_index)));
  return p;
}

std::string SearchSpace::describe(const SearchPoint& p) const {
  std::string s;
  for (size_t i = 0; i < params.size() && i < p.size(); ++i)
    s += (i ? " " : "") + params[i].name + "=" + std::to_string(p[i]);
  return s;
}

std::optional<SearchPoint> SearchSpace::parse(const std::string& text) const {
  std::map<std::string, int64_t> seen;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0) return std::nullopt;
    const std::string name = word.substr(0, eq), value = word.substr(eq + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (used != value.size() || !seen.emplace(name, v).second) return std::nullopt;
  }
  if (seen.size() != params.size()) return std::nullopt;
  SearchPoint p;
  for (const SearchParam& q : params) {
    auto it = seen.find(q.name);
    if (it == seen.end()) return std::nullopt;
    bool known = false;
    for (int64_t v : q.values) known = known || v == it->second;
    if (!known) return std::nullopt;
    p.push_back(it->second);
  }
  return p;
}

void SearchSpace::validate() const {
  std::set<std::string> names;
  for (const SearchParam& q : params) {
    if (q.name.empty()) throw std::invalid_argument("launch search: a parameter without a name");
    for (char c : q.name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
        throw std::invalid_argument("launch search: parameter name '" + q.name + "' has a character other than [A-Za-z0-9_]");
    if (!names.insert(q.name).second) throw std::invalid_argument("launch search: parameter '" + q.name + "' twice");
    if (q.values.empty()) throw std::invalid_argument("launch search: parameter '" + q.name + "' has no values");
    if (std::set<int64_t>(q.values.begin(), q.values.end()).size() != q.values.size())
      throw std::invalid_argument("launch search: parameter '" + q.name + "' repeats a value");
    if (q.default_index < 0 || static_cast<size_t>(q.default_index) >= q.values.size())
      throw std::invalid_argument("launch search: parameter '" + q.name + "' has its default index out of range");
  }
}

int64_t SearchSpace::size() const {
  int64_t n = 1;
  for (const SearchParam& q : params) {
    const int64_t k = static_cast<int64_t>(q.values.size());
    if (k != 0 && n > INT64_MAX / k) return INT64_MAX;
    n *= k;
  }
  return n;
}

namespace {

class Search {
 public:
  Search(const SearchSpace& space, const SearchCost& cost, const SearchOptions& o)
      : space_(space), cost_(cost), o_(o), rng_(o.seed) {
    if (!o_.clock)
      o_.clock = [] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
      };
    start_ = o_.clock();
  }

  SearchResult run() {
    SearchPoint cur = space_.default_point();
    std::optional<double> c = eval(cur);
    if (!c) return finish(cur, kInf);
    r_.default_cost = *c;
    double cur_cost = *c;
    if (!descend(cur, cur_cost)) return finish(cur, cur_cost);
    // Random points: a few more draws than points, so that draws landing on
    // points already evaluated do not use up the quota.
    SearchPoint rbest;
    double rbest_cost = kInf;
    int fresh = 0;
    for (int draw = 0; fresh < o_.random_points && draw < 4 * o_.random_points; ++draw) {
      SearchPoint q;
      for (const SearchParam& p : space_.params)
        q.push_back(p.values[static_cast<size_t>(rng_() % p.values.size())]);
      if (costs_.count(q)) continue;
      ++fresh;
      std::optional<double> cq = eval(q);
      if (!cq) break;
      if (*cq < rbest_cost) {
        rbest_cost = *cq;
        rbest = q;
      }
    }
    if (!rbest.empty() && gains(rbest_cost, cur_cost)) {
      cur = rbest;
      cur_cost = rbest_cost;
      if (!r_.budget_exhausted) descend(cur, cur_cost);
    }
    return finish(cur, cur_cost);
  }

 private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();

  bool gains(double c, double incumbent) const { return c < incumbent * (1 - o_.min_gain); }

  // nullopt: the budget is spent (nothing evaluated); +inf: an invalid point.
  std::optional<double> eval(const SearchPoint& p) {
    if (auto it = costs_.find(p); it != costs_.end()) return it->second;
    if (r_.evaluated >= o_.max_evaluations || o_.clock() - start_ >= o_.max_seconds) {
      r_.budget_exhausted = true;
      return std::nullopt;
    }
    ++r_.evaluated;
    double c = kInf;
    try {
      c = cost_(p);
      if (!(c >= 0) || c == kInf) throw std::runtime_error("launch search: the cost is not a finite number");
      r_.found = true;
    } catch (const std::exception&) {
      c = kInf;
      ++r_.invalid;
    }
    costs_.emplace(p, c);
    return c;
  }

  // Coordinate descent from `cur`; false when the budget ran out.
  bool descend(SearchPoint& cur, double& cur_cost) {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t i = 0; i < space_.params.size(); ++i) {
        SearchPoint best;
        double best_cost = kInf;
        for (int64_t v : space_.params[i].values) {
          if (v == cur[i]) continue;
          SearchPoint q = cur;
          q[i] = v;
          std::optional<double> c = eval(q);
          if (!c) {
            if (!best.empty() && gains(best_cost, cur_cost)) {
              cur = best;
              cur_cost = best_cost;
            }
            return false;
          }
          if (*c < best_cost) {
            best_cost = *c;
            best = q;
          }
        }
        if (!best.empty() && gains(best_cost, cur_cost)) {
          cur = best;
          cur_cost = best_cost;
          moved = true;
        }
      }
    }
    return true;
  }

  SearchResult finish(const SearchPoint& p, double cost) {
    r_.best = p;
    r_.best_cost = cost;
    return r_;
  }

  const SearchSpace& space_;
  const SearchCost& cost_;
  SearchOptions o_;
  std::mt19937_64 rng_;  // its output sequence is fixed by the standard (reproducible draws)
  double start_ = 0;
  std::map<SearchPoint, double> costs_;
  SearchResult r_;
};

}  // namespace

SearchResult launch_search(const SearchSpace& space, const SearchCost& cost, const SearchOptions& options) {
  space.validate();
  if (!(options.min_gain >= 0 && options.min_gain < 1))
    throw std::invalid_argument("launch search: min_gain must be in [0, 1)");
  return Search(space, cost, options).run();
}

}  // namespace tp::stax
