// Construction, hashing, equality, ordering, substitution, evaluation and
// printing of index expressions.
#include "stax/ir/index_expr.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <ostream>

#include "core/error.h"

namespace tp::stax::ir {

namespace {

size_t hash_mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

// Fills the cached fields (hash, var id span) from op, leaf data and operands.
std::shared_ptr<const IndexNode> finish(IndexNode n) {
  size_t h = hash_mix(0x51ed270b27ab1f3dULL, static_cast<size_t>(n.op));
  n.min_var = INT_MAX;
  n.max_var = INT_MIN;
  if (n.op == IndexOp::Const) {
    h = hash_mix(h, std::hash<int64_t>()(n.value));
  } else if (n.op == IndexOp::Var || n.op == IndexOp::Size) {
    h = hash_mix(h, std::hash<int>()(n.var_id));  // the name is not part of identity
    n.min_var = n.max_var = n.var_id;
  }
  for (const IndexExpr& o : n.operands) {
    h = hash_mix(h, o.hash());
    n.min_var = std::min(n.min_var, o.node().min_var);
    n.max_var = std::max(n.max_var, o.node().max_var);
  }
  n.hash = h;
  return std::make_shared<const IndexNode>(std::move(n));
}

std::shared_ptr<const IndexNode> const_node(int64_t c) {
  IndexNode n;
  n.op = IndexOp::Const;
  n.value = c;
  return finish(std::move(n));
}

const std::shared_ptr<const IndexNode>& zero_node() {
  static const std::shared_ptr<const IndexNode> zero = const_node(0);
  return zero;
}

bool is_binary(IndexOp op) { return op == IndexOp::FloorDiv || op == IndexOp::Mod; }

// Rank of each op in the canonical order (variables first, constants last).
int op_rank(IndexOp op) {
  switch (op) {
    case IndexOp::Var: return 0;
    case IndexOp::Size: return 1;
    case IndexOp::Mul: return 2;
    case IndexOp::FloorDiv: return 3;
    case IndexOp::Mod: return 4;
    case IndexOp::Min: return 5;
    case IndexOp::Max: return 6;
    case IndexOp::Add: return 7;
    case IndexOp::Const: return 8;
  }
  return 9;
}

}  // namespace

// ---- IndexExpr -------------------------------------------------------------

IndexExpr::IndexExpr() : node_(zero_node()) {}
IndexExpr::IndexExpr(int64_t c) : node_(c == 0 ? zero_node() : const_node(c)) {}
IndexExpr::IndexExpr(std::shared_ptr<const IndexNode> node) : node_(std::move(node)) {}

IndexExpr IndexExpr::make(IndexOp op, std::vector<IndexExpr> operands) {
  TP_CHECK(op != IndexOp::Const && op != IndexOp::Var && op != IndexOp::Size, ValueError,
           "IndexExpr::make: use IndexExpr(c) / var() / size_var() for leaves");
  if (is_binary(op)) {
    TP_CHECK(operands.size() == 2, ValueError, "IndexExpr::make: // and % take 2 operands, got ",
             operands.size());
  } else {
    TP_CHECK(operands.size() >= 2, ValueError,
             "IndexExpr::make: +, *, min, max take at least 2 operands, got ", operands.size());
  }
  IndexNode n;
  n.op = op;
  n.operands = std::move(operands);
  return IndexExpr(finish(std::move(n)));
}

IndexOp IndexExpr::op() const { return node_->op; }
bool IndexExpr::is_const() const { return node_->op == IndexOp::Const; }
bool IndexExpr::is_var() const { return node_->op == IndexOp::Var; }
bool IndexExpr::is_size() const { return node_->op == IndexOp::Size; }
int IndexExpr::size_index() const {
  TP_CHECK(is_size(), ValueError, "size_index() of an index expression that is not a size: ", to_string());
  return -2 - node_->var_id;
}

int64_t IndexExpr::const_value() const {
  TP_CHECK(is_const(), ValueError, "const_value() of non-constant index expression ", to_string());
  return node_->value;
}
int IndexExpr::var_id() const {
  TP_CHECK(is_var(), ValueError, "var_id() of non-variable index expression ", to_string());
  return node_->var_id;
}
const std::string& IndexExpr::var_name() const {
  TP_CHECK(is_var(), ValueError, "var_name() of non-variable index expression ", to_string());
  return node_->name;
}
const std::vector<IndexExpr>& IndexExpr::operands() const { return node_->operands; }
size_t IndexExpr::hash() const { return node_->hash; }

IndexExpr var(int id, std::string name) {
  IndexNode n;
  n.op = IndexOp::Var;
  n.var_id = id;
  n.name = std::move(name);
  return IndexExpr(finish(std::move(n)));
}

IndexExpr size_var(int k) {
  TP_CHECK(k >= 0, ValueError, "size_var: negative index ", k);
  IndexNode n;
  n.op = IndexOp::Size;
  n.var_id = size_var_id(k);
  return IndexExpr(finish(std::move(n)));
}

void collect_sizes(const IndexExpr& e, std::vector<int>& out) {
  const IndexNode& n = e.node();
  if (n.min_var > -2) return;  // no size below (size ids are <= -2, loop variables >= 0)
  if (n.op == IndexOp::Size) {
    int k = e.size_index();
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  for (const IndexExpr& o : n.operands) collect_sizes(o, out);
}

// ---- Operators: build nodes only --------------------------------------------

IndexExpr operator+(IndexExpr a, IndexExpr b) {
  return IndexExpr::make(IndexOp::Add, {std::move(a), std::move(b)});
}
IndexExpr operator-(IndexExpr a) {
  // Negating a constant directly keeps `i - 1` readable as Add(i, -1).
  if (a.is_const() && a.const_value() != INT64_MIN) return IndexExpr(-a.const_value());
  return IndexExpr::make(IndexOp::Mul, {std::move(a), IndexExpr(-1)});
}
IndexExpr operator-(IndexExpr a, IndexExpr b) { return std::move(a) + (-std::move(b)); }
IndexExpr operator*(IndexExpr a, IndexExpr b) {
  return IndexExpr::make(IndexOp::Mul, {std::move(a), std::move(b)});
}
IndexExpr& operator+=(IndexExpr& a, IndexExpr b) { return a = a + std::move(b); }
IndexExpr& operator-=(IndexExpr& a, IndexExpr b) { return a = a - std::move(b); }
IndexExpr& operator*=(IndexExpr& a, IndexExpr b) { return a = a * std::move(b); }
IndexExpr floordiv(IndexExpr a, IndexExpr b) {
  return IndexExpr::make(IndexOp::FloorDiv, {std::move(a), std::move(b)});
}
IndexExpr mod(IndexExpr a, IndexExpr b) {
  return IndexExpr::make(IndexOp::Mod, {std::move(a), std::move(b)});
}
IndexExpr min(IndexExpr a, IndexExpr b) {
  return IndexExpr::make(IndexOp::Min, {std::move(a), std::move(b)});
}
IndexExpr max(IndexExpr a, IndexExpr b) {
  return IndexExpr::make(IndexOp::Max, {std::move(a), std::move(b)});
}

// ---- Equality and order ---------------------------------------------------------

bool operator==(const IndexExpr& a, const IndexExpr& b) {
  const IndexNode& x = a.node();
  const IndexNode& y = b.node();
  if (&x == &y) return true;
  if (x.hash != y.hash || x.op != y.op) return false;
  if (x.op == IndexOp::Const) return x.value == y.value;
  if (x.op == IndexOp::Var || x.op == IndexOp::Size) return x.var_id == y.var_id;
  if (x.operands.size() != y.operands.size()) return false;
  for (size_t i = 0; i < x.operands.size(); ++i) {
    if (!(x.operands[i] == y.operands[i])) return false;
  }
  return true;
}

bool identical(const IndexExpr& a, const IndexExpr& b) {
  const IndexNode& x = a.node();
  const IndexNode& y = b.node();
  if (&x == &y) return true;
  if (x.hash != y.hash || x.op != y.op) return false;
  if (x.op == IndexOp::Const) return x.value == y.value;
  if (x.op == IndexOp::Size) return x.var_id == y.var_id;
  if (x.op == IndexOp::Var) return x.var_id == y.var_id && x.name == y.name;
  if (x.operands.size() != y.operands.size()) return false;
  for (size_t i = 0; i < x.operands.size(); ++i)
    if (!identical(x.operands[i], y.operands[i])) return false;
  return true;
}

int compare(const IndexExpr& a, const IndexExpr& b) {
  const IndexNode& x = a.node();
  const IndexNode& y = b.node();
  if (&x == &y) return 0;
  // Group by leading loop variable so terms print in loop order.
  if (x.min_var != y.min_var) return x.min_var < y.min_var ? -1 : 1;
  if (x.op != y.op) return op_rank(x.op) < op_rank(y.op) ? -1 : 1;
  if (x.op == IndexOp::Const) return x.value == y.value ? 0 : (x.value < y.value ? -1 : 1);
  if (x.op == IndexOp::Var || x.op == IndexOp::Size) return x.var_id == y.var_id ? 0 : (x.var_id < y.var_id ? -1 : 1);
  if (x.operands.size() != y.operands.size()) return x.operands.size() < y.operands.size() ? -1 : 1;
  for (size_t i = 0; i < x.operands.size(); ++i) {
    if (int c = compare(x.operands[i], y.operands[i])) return c;
  }
  return 0;
}

// ---- Traversals ---------------------------------------------------------------------

bool depends_on(const IndexExpr& e, int var_id) {
  const IndexNode& n = e.node();
  if (var_id < n.min_var || var_id > n.max_var) return false;  // cached span: cheap reject
  if (n.op == IndexOp::Var || n.op == IndexOp::Size) return n.var_id == var_id;
  for (const IndexExpr& o : n.operands) {
    if (depends_on(o, var_id)) return true;
  }
  return false;
}

IndexExpr substitute(const IndexExpr& e, const std::unordered_map<int, IndexExpr>& by_var_id) {
  if (e.is_var() || e.is_size()) {
    auto it = by_var_id.find(e.node().var_id);
    return it == by_var_id.end() ? e : it->second;
  }
  if (e.operands().empty()) return e;
  std::vector<IndexExpr> ops;
  ops.reserve(e.operands().size());
  bool changed = false;
  for (const IndexExpr& o : e.operands()) {
    ops.push_back(substitute(o, by_var_id));
    changed = changed || &ops.back().node() != &o.node();
  }
  return changed ? IndexExpr::make(e.op(), std::move(ops)) : e;  // share untouched subtrees
}

namespace {

int64_t checked(bool overflowed, int64_t v, const char* what) {
  TP_CHECK(!overflowed, ValueError, "evaluate: int64 overflow in ", what);
  return v;
}

int64_t eval_rec(const IndexExpr& e, const std::unordered_map<int, int64_t>& values) {
  switch (e.op()) {
    case IndexOp::Const:
      return e.const_value();
    case IndexOp::Var: {
      auto it = values.find(e.var_id());
      TP_CHECK(it != values.end(), ValueError, "evaluate: no value for variable ", e.to_string(),
               " (id ", e.var_id(), ")");
      return it->second;
    }
    case IndexOp::Size: {
      auto it = values.find(e.node().var_id);
      TP_CHECK(it != values.end(), ValueError, "evaluate: no value for size variable ", e.to_string(),
               " (id size_var_id(", e.size_index(), "))");
      return it->second;
    }
    case IndexOp::Add:
    case IndexOp::Mul: {
      int64_t acc = e.op() == IndexOp::Add ? 0 : 1;
      for (const IndexExpr& o : e.operands()) {
        int64_t v = eval_rec(o, values);
        bool ov = e.op() == IndexOp::Add ? __builtin_add_overflow(acc, v, &acc)
                                         : __builtin_mul_overflow(acc, v, &acc);
        checked(ov, acc, e.op() == IndexOp::Add ? "+" : "*");
      }
      return acc;
    }
    case IndexOp::FloorDiv:
    case IndexOp::Mod: {
      int64_t a = eval_rec(e.operands()[0], values);
      int64_t b = eval_rec(e.operands()[1], values);
      TP_CHECK(b != 0, ValueError, "evaluate: division by zero in ", e.to_string());
      if (e.op() == IndexOp::Mod) return detail::floor_mod(a, b);
      checked(a == INT64_MIN && b == -1, 0, "//");
      return detail::floor_div(a, b);
    }
    case IndexOp::Min:
    case IndexOp::Max: {
      int64_t acc = eval_rec(e.operands()[0], values);
      for (size_t i = 1; i < e.operands().size(); ++i) {
        int64_t v = eval_rec(e.operands()[i], values);
        acc = e.op() == IndexOp::Min ? std::min(acc, v) : std::max(acc, v);
      }
      return acc;
    }
  }
  return 0;
}

}  // namespace

int64_t evaluate(const IndexExpr& e, const std::unordered_map<int, int64_t>& values) {
  return eval_rec(e, values);
}

// ---- Printing ---------------------------------------------------------------------

namespace {

// Prints either the readable form (to_string) or C++ (to_c). Both share the
// layout; C differs in constants, division and min/max. Output is appended to
// one string.
class Printer {
 public:
  explicit Printer(const RangeMap* c_ranges) : c_ranges_(c_ranges) {}

  std::string str(const IndexExpr& e) {
    std::string out;
    print(out, e, false);
    return out;
  }

 private:
  bool c_mode() const { return c_ranges_ != nullptr; }

  void print(std::string& out, const IndexExpr& e, bool force_ll) {
    // A variable-free subtree would be evaluated in C's `int`: force LL constants.
    force_ll = force_ll || (c_mode() && !e.is_const() && e.node().min_var > e.node().max_var);
    switch (e.op()) {
      case IndexOp::Const: constant(out, e.const_value(), force_ll); break;
      case IndexOp::Var: var_name(out, e); break;
      case IndexOp::Size:
        out += c_mode() ? "tp_size" : "s";
        out += std::to_string(e.size_index());
        break;
      case IndexOp::Add: sum(out, e, force_ll); break;
      case IndexOp::Mul: product(out, e.operands(), std::nullopt, force_ll); break;
      case IndexOp::FloorDiv:
      case IndexOp::Mod: division(out, e, force_ll); break;
      case IndexOp::Min:
      case IndexOp::Max: min_max(out, e, force_ll); break;
    }
  }

  static void var_name(std::string& out, const IndexExpr& e) {
    if (e.var_name().empty()) {
      out += 'v';
      out += std::to_string(e.var_id());
    } else {
      out += e.var_name();
    }
  }

  void constant(std::string& out, int64_t v, bool force_ll) const {
    if (c_mode() && v == INT64_MIN) {
      out += "(-9223372036854775807LL - 1)";  // the literal itself would overflow
      return;
    }
    out += std::to_string(v);
    if (c_mode() && (force_ll || v < INT_MIN || v > INT_MAX)) out += "LL";
  }

  // A sum term t = Mul(f..., c) with c < 0 (or a negative constant) prints as
  // " - |t|". Returns false when t is not such a term.
  bool negated_term(std::string& out, const IndexExpr& t, bool force_ll) {
    if (t.is_const()) {
      int64_t v = t.const_value();
      if (v >= 0 || v == INT64_MIN) return false;
      out += " - ";
      constant(out, -v, force_ll);
      return true;
    }
    if (t.op() != IndexOp::Mul || !t.operands().back().is_const()) return false;
    int64_t c = t.operands().back().const_value();
    if (c >= 0 || c == INT64_MIN) return false;
    std::vector<IndexExpr> factors(t.operands().begin(), t.operands().end() - 1);
    out += " - ";
    product(out, factors, c == -1 ? std::nullopt : std::optional<int64_t>(-c), force_ll);
    return true;
  }

  void sum(std::string& out, const IndexExpr& e, bool force_ll) {
    out += '(';
    print(out, e.operands()[0], force_ll);
    for (size_t i = 1; i < e.operands().size(); ++i) {
      if (negated_term(out, e.operands()[i], force_ll)) continue;
      out += " + ";
      print(out, e.operands()[i], force_ll);
    }
    out += ')';
  }

  // factors (and an optional trailing constant) joined by " * ".
  void product(std::string& out, const std::vector<IndexExpr>& factors,
               std::optional<int64_t> trailing, bool force_ll) {
    if (factors.size() == 1 && !trailing) return print(out, factors[0], force_ll);
    out += '(';
    for (size_t i = 0; i < factors.size(); ++i) {
      if (i) out += " * ";
      print(out, factors[i], force_ll);
    }
    if (trailing) {
      out += " * ";
      constant(out, *trailing, force_ll);
    }
    out += ')';
  }

  void division(std::string& out, const IndexExpr& e, bool force_ll) {
    const IndexExpr& a = e.operands()[0];
    const IndexExpr& b = e.operands()[1];
    bool is_div = e.op() == IndexOp::FloorDiv;
    // C's / and % truncate; they agree with floor semantics only for a >= 0, b > 0.
    bool infix = !c_mode() || (range_of(a, *c_ranges_).lo >= 0 && range_of(b, *c_ranges_).lo > 0);
    if (infix) {
      out += '(';
      print(out, a, force_ll);
      out += is_div ? (c_mode() ? " / " : " // ") : " % ";
      print(out, b, force_ll);
      out += ')';
    } else {
      out += is_div ? "tp_floordiv(" : "tp_mod(";
      print(out, a, force_ll);
      out += ", ";
      print(out, b, force_ll);
      out += ')';
    }
  }

  void min_max(std::string& out, const IndexExpr& e, bool force_ll) {
    bool is_min = e.op() == IndexOp::Min;
    const std::vector<IndexExpr>& ops = e.operands();
    if (!c_mode()) {
      out += is_min ? "min(" : "max(";
      for (size_t i = 0; i < ops.size(); ++i) {
        if (i) out += ", ";
        print(out, ops[i], force_ll);
      }
      out += ')';
      return;
    }
    // Fold pairwise. Two leaves may be repeated in a conditional; anything
    // larger goes through an immediately-invoked lambda so it is evaluated
    // (and printed) once and the kernel needs no helper.
    const char* cmp = is_min ? " < " : " > ";
    std::string acc = str_of(ops[0], force_ll);
    bool acc_leaf = ops[0].operands().empty();
    for (size_t i = 1; i < ops.size(); ++i) {
      std::string next = str_of(ops[i], force_ll);
      std::string folded;
      if (acc_leaf && ops[i].operands().empty()) {
        folded.append("(").append(acc).append(cmp).append(next);
        folded.append(" ? ").append(acc).append(" : ").append(next).append(")");
      } else {
        // Parenthesized: `b[[](...)...]` would parse as an attribute.
        folded.append("([](long long x_, long long y_) { return x_").append(cmp);
        folded.append("y_ ? x_ : y_; }(").append(acc).append(", ").append(next).append("))");
      }
      acc = std::move(folded);
      acc_leaf = false;
    }
    out += acc;
  }

  std::string str_of(const IndexExpr& e, bool force_ll) {
    std::string s;
    print(s, e, force_ll);
    return s;
  }

  const RangeMap* c_ranges_;  // null: readable mode
};

}  // namespace

std::string IndexExpr::to_string() const { return Printer(nullptr).str(*this); }

std::ostream& operator<<(std::ostream& os, const IndexExpr& e) { return os << e.to_string(); }

std::string to_c(const IndexExpr& e, const RangeMap& ranges) { return Printer(&ranges).str(e); }

std::string index_c_prelude() {
  return "static inline long long tp_floordiv(long long a, long long b) {\n"
         "  long long q = a / b;\n"
         "  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
         "}\n"
         "static inline long long tp_mod(long long a, long long b) {\n"
         "  if (b == -1) return 0;\n"
         "  long long r = a % b;\n"
         "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
         "}\n";
}

}  // namespace tp::stax::ir
