// Symbolic index expressions: the address arithmetic of generated loops.
//
// An IndexExpr is an immutable expression tree over 64-bit integers whose leaves
// are constants, loop variables and size variables (the run-time value of an
// extent: sizes[k] of the entry point, see size_var). The lowering builds e.g. the flat offset of
// an element of a strided / transposed / reshaped tensor as a function of loop
// variables; the simplifier turns that into a canonical, cheap form; codegen
// prints it as C++ (to_c). Expressions are IR data: printable, hashable and
// comparable structurally, so they can key caches and be checked in tests.
//
// Semantics: exact integer arithmetic. FloorDiv / Mod follow Python (floor
// division; the remainder has the divisor's sign). Division by zero is
// undefined (evaluate throws). The operators below only build nodes; nothing is
// simplified until simplify() is called.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tp::stax::ir {

enum class IndexOp { Const, Var, Add, Mul, FloorDiv, Mod, Min, Max, Size };

struct IndexNode;

// Cheap-to-copy handle to an immutable node (shared, never mutated).
class IndexExpr {
 public:
  IndexExpr();               // the constant 0
  IndexExpr(int64_t c);      // NOLINT(google-explicit-constructor): `i * 4 + 1` must work
  // Raw node with the given operands, no simplification. Add/Mul/Min/Max take
  // two or more operands, FloorDiv/Mod exactly two. Use var() / IndexExpr(c)
  // for leaves. Throws tp::ValueError on a wrong operand count.
  static IndexExpr make(IndexOp op, std::vector<IndexExpr> operands);

  IndexOp op() const;
  bool is_const() const;
  int64_t const_value() const;  // precondition: is_const() (else tp::ValueError)
  bool is_var() const;
  int var_id() const;                   // precondition: is_var()
  bool is_size() const;
  int size_index() const;               // k of size_var(k); precondition: is_size()
  const std::string& var_name() const;  // precondition: is_var()
  // Empty for leaves. Add/Mul/Min/Max may be n-ary after simplify; FloorDiv/Mod binary.
  const std::vector<IndexExpr>& operands() const;
  size_t hash() const;
  // Readable form, e.g. "((i0 * 2048) + r0)", "(i0 // 4)", "(i0 % 4)",
  // "min(i0, 7)". A term with a negative constant factor inside a sum prints
  // as a subtraction: Add(i, Mul(j, -2)) -> "(i - (j * 2))".
  std::string to_string() const;

  const IndexNode& node() const { return *node_; }

 private:
  explicit IndexExpr(std::shared_ptr<const IndexNode> node);
  friend IndexExpr var(int id, std::string name);
  friend IndexExpr size_var(int k);
  std::shared_ptr<const IndexNode> node_;
};

// Node layout; an implementation detail, prefer the IndexExpr accessors.
struct IndexNode {
  IndexOp op = IndexOp::Const;
  int64_t value = 0;   // Const
  int var_id = 0;      // Var; Size: size_var_id(k)
  std::string name;    // Var (printing only; identity is var_id)
  std::vector<IndexExpr> operands;
  size_t hash = 0;     // cached structural hash
  int min_var = 0;     // smallest / largest var id mentioned; min_var > max_var when none
  int max_var = -1;    // (both filled in at construction)
};

// Loop variable; two vars are the same variable iff their ids are equal.
// An empty name prints as "v<id>".
IndexExpr var(int id, std::string name);

// Size variable k: a non-negative extent known only at run time, the value of
// sizes[k] in the entry point `tp_entry(void* const* bufs, const long long*
// sizes)`. It is a leaf like a loop variable and shares their id space under
// size_var_id(k) (negative: never a loop variable's id), so RangeMap (absent:
// [0, INT64_MAX]), evaluate() and substitute() take it under that id;
// substituting constants for every size specializes an expression fully.
// Prints as "s<k>" (to_string) and "tp_size<k>" (to_c: the printer defines
// that local from sizes[k]).
constexpr int size_var_id(int k) { return -2 - k; }
IndexExpr size_var(int k);
// Indices k of the size variables e mentions, appended to `out` once each.
void collect_sizes(const IndexExpr& e, std::vector<int>& out);

IndexExpr operator+(IndexExpr a, IndexExpr b);
IndexExpr operator-(IndexExpr a, IndexExpr b);  // a + b * -1 (a constant b is negated directly)
IndexExpr operator-(IndexExpr a);               // a * -1 (a constant is negated directly)
IndexExpr operator*(IndexExpr a, IndexExpr b);
IndexExpr& operator+=(IndexExpr& a, IndexExpr b);
IndexExpr& operator-=(IndexExpr& a, IndexExpr b);
IndexExpr& operator*=(IndexExpr& a, IndexExpr b);
IndexExpr floordiv(IndexExpr a, IndexExpr b);  // floor semantics (Python //) for any signs
IndexExpr mod(IndexExpr a, IndexExpr b);       // Python % semantics (result has the divisor's sign)
IndexExpr min(IndexExpr a, IndexExpr b);
IndexExpr max(IndexExpr a, IndexExpr b);

std::ostream& operator<<(std::ostream& os, const IndexExpr& e);  // to_string()

// Structural equality (vars compare by id).
bool operator==(const IndexExpr& a, const IndexExpr& b);
// a == b and every variable spelled the same: interchangeable in printed code
// too. What a process-wide table (the loop IR's intern table) must compare:
// another program may use the same id under another name.
bool identical(const IndexExpr& a, const IndexExpr& b);
struct IndexExprHash {
  size_t operator()(const IndexExpr& e) const { return e.hash(); }
};
// Deterministic total order consistent with ==: <0, 0, >0. Orders by the
// smallest variable mentioned first (constants last), then by structure. The
// simplifier sorts sum terms and min/max operands with it.
int compare(const IndexExpr& a, const IndexExpr& b);

// Value at a point. Throws tp::ValueError for an unbound variable, division by
// zero, or int64 overflow.
int64_t evaluate(const IndexExpr& e, const std::unordered_map<int, int64_t>& values);

namespace detail {
// Python-style integer division on int64. Preconditions: b != 0 and not
// (a == INT64_MIN && b == -1). Shared by evaluate, constant folding and ranges.
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;  // C++ truncates toward zero
  return q;
}
inline int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;  // avoids INT64_MIN % -1
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
}  // namespace detail

// ---- Range analysis (index_range.cpp) ------------------------------------
struct Interval {  // inclusive; INT64_MIN / INT64_MAX mean unbounded
  int64_t lo, hi;
};
using RangeMap = std::unordered_map<int, Interval>;  // var id -> range; absent = unbounded
// Sound interval: every value e takes for variables inside `ranges` lies in
// the result. Arithmetic saturates instead of overflowing.
Interval range_of(const IndexExpr& e, const RangeMap& ranges);

// ---- Simplification (index_simplify.cpp) ---------------------------------
// Canonical, cheaper form with the same value for every assignment of the
// variables inside `ranges` (absent vars: any value). Idempotent. Folds
// constants; flattens and sorts sums (constant last) and products; collects
// like terms; distributes constant factors; splits multiples of c out of
// x // c and x % c; drops // and % that ranges make trivial; merges
// (x // a) // b, (x % (a*b)) // a, (x % (a*b)) % a; recombines
// (x // c) * (c*k) + (x % c) * k -> x * k (undoing flattened loops); drops
// min/max operands that ranges prove dominated; a var with a one-point range
// becomes that constant. See index_simplify.cpp for the canonical form.
IndexExpr simplify(const IndexExpr& e, const RangeMap& ranges = {});
// Replaces variables by expressions (no simplification).
IndexExpr substitute(const IndexExpr& e, const std::unordered_map<int, IndexExpr>& by_var_id);

struct AffineForm {
  int64_t constant = 0;
  std::vector<std::pair<int, int64_t>> terms;  // (var id, coefficient), sorted by var id, no zero coefs
};
// e (simplified first) as constant + sum(coef * var); nullopt if any //, %,
// min, max or var*var remains.
std::optional<AffineForm> as_affine(const IndexExpr& e);
// Coefficient of var in e (simplified first) when e is affine in that var;
// other parts may be non-affine but must not mention var. 0 when e does not
// mention var; nullopt when var appears non-affinely. Simplify with the loop
// ranges first when they matter (e.g. (i0*4 + i1) // 4 with i1 in [0, 3]).
std::optional<int64_t> coefficient_of(const IndexExpr& e, int var_id);
// Structural: whether the variable occurs in e.
bool depends_on(const IndexExpr& e, int var_id);

// ---- C printing (index_expr.cpp) -------------------------------------------
// C++ source for generated kernels (call simplify first). Variables print as
// their name; all arithmetic is int64 ("long long"), constants outside the int
// range get an LL suffix. FloorDiv/Mod print as plain `/` and `%` when range
// analysis proves the dividend >= 0 and the divisor > 0, otherwise as
// tp_floordiv(a, b) / tp_mod(a, b), which the generated prelude defines (see
// index_c_prelude). Min/Max print as self-contained conditional expressions.
std::string to_c(const IndexExpr& e, const RangeMap& ranges);
// Definitions of tp_floordiv / tp_mod with the exact semantics of evaluate(),
// for a kernel prelude that does not define its own.
std::string index_c_prelude();

}  // namespace tp::stax::ir

template <>
struct std::hash<tp::stax::ir::IndexExpr> {
  size_t operator()(const tp::stax::ir::IndexExpr& e) const { return e.hash(); }
};
