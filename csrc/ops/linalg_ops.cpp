// einsum as a composite: the equation is reduced to views, sums and batched
// matrix products (matmul), so autograd and the tracer only see those.
//   1. each operand: a repeated label takes the diagonal (a multiply by an
//      identity mask and a sum, which covers traces), and labels needed by
//      nobody else are summed out;
//   2. operands are contracted left to right: shared labels that are still
//      needed are batch dims, the others are summed by the matrix product;
//   3. the last result is summed and permuted into the output order.
#include <algorithm>
#include <map>
#include <set>

#include "ops/derivative_util.h"
#include "ops/families.h"
#include "ops/registry.h"

namespace tp {
namespace {

using Labels = std::vector<int>;  // letters are their char code; ellipsis dims are 256 + k

struct Equation {
  std::vector<Labels> inputs;
  Labels output;
};

// Splits the terms; "..." becomes the labels of the ellipsis dims, right-aligned.
Equation parse_equation(std::string eq, const std::vector<Tensor>& ops) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  TP_CHECK(terms.size() == ops.size(), ValueError, "einsum: the equation '", eq, "' has ", terms.size(),
           " operand terms but ", ops.size(), " tensors were given");
  auto letters = [&](const std::string& t, int* ell_at) {
    Labels l;
    *ell_at = -1;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.compare(i, 3, "...") == 0) {
        TP_CHECK(*ell_at < 0, ValueError, "einsum: more than one ellipsis in term '", t, "'");
        *ell_at = static_cast<int>(l.size());
        i += 2;
        continue;
      }
      TP_CHECK(std::isalpha(static_cast<unsigned char>(t[i])), ValueError, "einsum: invalid subscript '", t[i],
               "' in equation '", eq, "' (letters a-z and A-Z only)");
      l.push_back(t[i]);
    }
    return l;
  };
  Equation e;
  int max_ell = 0;
  std::vector<int> ell_pos(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    e.inputs.push_back(letters(terms[i], &ell_pos[i]));
    const int64_t nd = ops[i].dim(), nl = static_cast<int64_t>(e.inputs[i].size());
    const int64_t ell = nd - nl;
    TP_CHECK(ell == 0 || (ell > 0 && ell_pos[i] >= 0), ValueError, "einsum: the term '", terms[i], "' has ", nl,
             " subscripts but operand ", i, " has shape ", shape_str(ops[i].sizes()));
    TP_CHECK(ell >= 0, ValueError, "einsum: the term '", terms[i], "' has ", nl, " subscripts but operand ", i,
             " has shape ", shape_str(ops[i].sizes()));
    max_ell = std::max<int>(max_ell, static_cast<int>(ell));
  }
  Labels ellipsis;
  for (int k = 0; k < max_ell; ++k) ellipsis.push_back(256 + k);
  for (size_t i = 0; i < terms.size(); ++i) {
    if (ell_pos[i] < 0) continue;
    const int64_t ell = ops[i].dim() - static_cast<int64_t>(e.inputs[i].size());
    Labels& l = e.inputs[i];
    l.insert(l.begin() + ell_pos[i], ellipsis.end() - ell, ellipsis.end());
  }
  if (arrow != std::string::npos) {
    int at;
    e.output = letters(eq.substr(arrow + 2), &at);
    if (at >= 0) e.output.insert(e.output.begin() + at, ellipsis.begin(), ellipsis.end());
    std::set<int> seen;
    for (int c : e.output) {
      TP_CHECK(seen.insert(c).second, ValueError, "einsum: output subscript '", static_cast<char>(c),
               "' appears more than once in '", eq, "'");
      bool found = false;
      for (auto& l : e.inputs) found |= std::count(l.begin(), l.end(), c) > 0;
      TP_CHECK(found, ValueError, "einsum: output subscript '", static_cast<char>(c),
               "' does not appear in the inputs of '", eq, "'");
    }
  } else {  // implicit: the ellipsis, then the letters used exactly once, in alphabetical order
    std::map<int, int> count;
    for (auto& l : e.inputs)
      for (int c : l) count[c]++;
    e.output = ellipsis;
    for (auto [c, n] : count)
      if (n == 1 && c < 256) e.output.push_back(c);
  }
  return e;
}

int64_t find(const Labels& l, int c) {
  auto it = std::find(l.begin(), l.end(), c);
  return it == l.end() ? -1 : it - l.begin();
}

// A repeated label: keep the diagonal (x * identity over the two dims, summed over the second).
void take_diagonals(Tensor& x, Labels& l) {
  for (size_t i = 0; i < l.size(); ++i) {
    for (size_t j = i + 1; j < l.size();) {
      if (l[j] != l[i]) {
        ++j;
        continue;
      }
      const int64_t n = x.sizes()[i];
      TP_CHECK(x.sizes()[j] == n, ValueError, "einsum: subscript '", static_cast<char>(l[i]),
               "' is repeated for dims of different sizes ", n, " and ", x.sizes()[j]);
      Shape mshape(x.dim(), 1);
      mshape[i] = n;
      mshape[j] = n;
      const Tensor mask = ops::reshape(ops::eye_on(x, n, x.dtype()), mshape);
      x = ops::sum(ops::mul(x, mask), {static_cast<int64_t>(j)});
      l.erase(l.begin() + static_cast<int64_t>(j));
    }
  }
}

// Sums the dims whose labels are not in `keep`.
void sum_unneeded(Tensor& x, Labels& l, const std::set<int>& keep) {
  ops::Dims dims;
  Labels rest;
  for (size_t i = 0; i < l.size(); ++i) {
    if (keep.count(l[i])) rest.push_back(l[i]);
    else dims.push_back(static_cast<int64_t>(i));
  }
  if (dims.empty()) return;
  x = ops::sum(x, dims);
  l = rest;
}

Tensor permuted(const Tensor& x, const Labels& have, const Labels& want) {
  ops::Dims perm;
  for (int c : want) perm.push_back(find(have, c));
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  return identity ? x : ops::permute(x, perm);
}

int64_t prod(const Shape& s) {
  int64_t p = 1;
  for (int64_t v : s) p *= v;
  return p;
}

// a (labels la) times b (labels lb), keeping the labels in `keep`.
Tensor contract(Tensor a, Labels& la, Tensor b, const Labels& lb0, const std::set<int>& keep) {
  Labels lb = lb0;
  std::set<int> need_a(keep), need_b(keep);
  need_a.insert(lb.begin(), lb.end());
  need_b.insert(la.begin(), la.end());
  sum_unneeded(a, la, need_a);
  sum_unneeded(b, lb, need_b);
  Labels batch, aonly, con, bonly;
  for (int c : la) {
    if (find(lb, c) < 0) aonly.push_back(c);
    else if (keep.count(c)) batch.push_back(c);
    else con.push_back(c);
  }
  for (int c : lb)
    if (find(la, c) < 0) bonly.push_back(c);
  // Size-1 dims broadcast against the other operand.
  Shape ea = a.sizes(), eb = b.sizes();
  for (size_t i = 0; i < la.size(); ++i) {
    int64_t j = find(lb, la[i]);
    if (j < 0 || ea[i] == eb[j]) continue;
    TP_CHECK(ea[i] == 1 || eb[j] == 1, ValueError, "einsum: operands do not broadcast for subscript '",
             la[i] < 256 ? std::string(1, static_cast<char>(la[i])) : std::string("..."), "' (sizes ", ea[i],
             " and ", eb[j], " in operands of shape ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), ")");
    if (ea[i] == 1) ea[i] = eb[j];
    else eb[j] = ea[i];
  }
  if (ea != a.sizes()) a = ops::expand(a, ea);
  if (eb != b.sizes()) b = ops::expand(b, eb);
  auto sizes_of = [&](const Labels& ls) {
    Shape s;
    for (int c : ls) {
      int64_t i = find(la, c);
      s.push_back(i >= 0 ? a.sizes()[i] : b.sizes()[find(lb, c)]);
    }
    return s;
  };
  const Shape sb = sizes_of(batch), sa = sizes_of(aonly), sc = sizes_of(con), so = sizes_of(bonly);
  Labels pa = batch, pb = batch;
  pa.insert(pa.end(), aonly.begin(), aonly.end());
  pa.insert(pa.end(), con.begin(), con.end());
  pb.insert(pb.end(), con.begin(), con.end());
  pb.insert(pb.end(), bonly.begin(), bonly.end());
  Tensor a3 = ops::reshape(permuted(a, la, pa), {prod(sb), prod(sa), prod(sc)});
  Tensor b3 = ops::reshape(permuted(b, lb, pb), {prod(sb), prod(sc), prod(so)});
  Tensor r = ops::matmul(a3, b3);
  Shape rs = sb;
  rs.insert(rs.end(), sa.begin(), sa.end());
  rs.insert(rs.end(), so.begin(), so.end());
  la = batch;
  la.insert(la.end(), aonly.begin(), aonly.end());
  la.insert(la.end(), bonly.begin(), bonly.end());
  return ops::reshape(r, rs);
}

std::vector<Tensor> einsum_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  TP_CHECK(!in.empty(), ValueError, "einsum: at least one operand is required");
  for (auto& t : in)
    TP_CHECK(t.dtype() == in[0].dtype(), TypeError, "einsum: expected all operands to have the same dtype, but got ",
             dtype_name(in[0].dtype()), " and ", dtype_name(t.dtype()));
  Equation e = parse_equation(attrs.get_str("equation"), in);
  std::vector<Tensor> xs = in;
  for (size_t i = 0; i < xs.size(); ++i) take_diagonals(xs[i], e.inputs[i]);
  Tensor r = xs[0];
  Labels lr = e.inputs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    std::set<int> keep(e.output.begin(), e.output.end());
    for (size_t j = i + 1; j < xs.size(); ++j) keep.insert(e.inputs[j].begin(), e.inputs[j].end());
    r = contract(r, lr, xs[i], e.inputs[i], keep);
  }
  sum_unneeded(r, lr, std::set<int>(e.output.begin(), e.output.end()));
  return {permuted(r, lr, e.output)};
}

std::vector<TensorMeta> composite_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs&) {
  throw Error(str("internal: ", op.name, " is a composite and has no inference of its own"));
}

}  // namespace

void register_linalg_ops() {
  register_op({.name = "einsum", .schema = "einsum(str equation, Tensor[] tensors) -> Tensor", .tags = kComposite,
               .num_inputs = -1, .infer = &composite_infer, .decompose = &einsum_decompose});
}

}  // namespace tp
