"""End-to-end training: nn + autograd + optim together must make the loss fall.

The same architectures are written once over a module namespace (tensorplay.nn
or torch.nn), so a side-by-side run against PyTorch from identical weights can
also check the whole trajectory, not just that the loss goes down.
"""
from collections import OrderedDict

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, optim


def arr(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- data
def regression_data(n=256, d=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    w = rng.standard_normal((d, 1)).astype(np.float32)
    y = (x @ w + 0.5 * np.tanh(x[:, :1] * x[:, 1:2])).astype(np.float32)
    return x, y


def blobs(n=300, d=2, k=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((k, d)) * 5
    labels = rng.integers(0, k, size=n)
    x = (centers[labels] + rng.standard_normal((n, d))).astype(np.float32)
    return x, labels.astype(np.int64)


def first_token_task(n=64, length=5, vocab=6, seed=0):
    """Every position must predict the sequence's first token: needs attention to position 0."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, vocab, size=(n, length)).astype(np.int64)
    targets = np.repeat(tokens[:, :1], length, axis=1)
    return tokens, targets


# ---------------------------------------------------------------- architectures (over tp.nn or torch.nn)
def mlp(m, d_in, d_hidden, d_out, act="ReLU"):
    return m.Sequential(m.Linear(d_in, d_hidden), getattr(m, act)(), m.Linear(d_hidden, d_hidden),
                        getattr(m, act)(), m.Linear(d_hidden, d_out))


def transformer(m, vocab, length, dim=32, heads=4):
    class Block(m.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = m.LayerNorm(dim)
            self.attn = m.MultiheadAttention(dim, heads, batch_first=True)
            self.ln2 = m.LayerNorm(dim)
            self.mlp = m.Sequential(m.Linear(dim, 4 * dim), m.GELU(), m.Linear(4 * dim, dim))

        def forward(self, x):
            h = self.ln1(x)
            a, _ = self.attn(h, h, h, need_weights=False)
            x = x + a
            return x + self.mlp(self.ln2(x))

    class Model(m.Module):
        def __init__(self):
            super().__init__()
            self.tok = m.Embedding(vocab, dim)
            self.pos = m.Embedding(length, dim)
            self.block = Block()
            self.ln_f = m.LayerNorm(dim)
            self.head = m.Linear(dim, vocab)

        def forward(self, tokens, positions):
            x = self.tok(tokens) + self.pos(positions)
            return self.head(self.ln_f(self.block(x)))

    return Model()


def copy_weights(dst, src):
    dst.load_state_dict(OrderedDict((k, tp.tensor(v.detach().numpy())) for k, v in src.state_dict().items()))


# ---------------------------------------------------------------- training loops
def train(model, loss_fn, inputs, target, steps, opt):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(*inputs), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_mlp_regression_adam():
    tp.manual_seed(0)
    x, y = regression_data()
    model = mlp(nn, 4, 32, 1, act="Tanh")
    losses = train(model, nn.MSELoss(), (tp.tensor(x),), tp.tensor(y), 80, optim.Adam(model.parameters(), lr=1e-2))
    assert losses[-1] < 0.05 * losses[0], losses[::10]
    assert all(np.isfinite(losses))


def test_mlp_regression_sgd_momentum_with_schedule():
    tp.manual_seed(1)
    x, y = regression_data(seed=1)
    model = mlp(nn, 4, 32, 1)
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=60)
    loss_fn = nn.MSELoss()
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = loss_fn(model(tp.tensor(x)), tp.tensor(y))
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0], losses[::10]


def test_mlp_classification_cross_entropy():
    tp.manual_seed(2)
    x, labels = blobs()
    model = mlp(nn, 2, 32, 3, act="GELU")
    losses = train(model, nn.CrossEntropyLoss(), (tp.tensor(x),), tp.tensor(labels), 60,
                   optim.AdamW(model.parameters(), lr=1e-2))
    assert losses[-1] < 0.3 * losses[0], losses[::10]
    model.eval()
    accuracy = (arr(model(tp.tensor(x))).argmax(1) == labels).mean()
    assert accuracy > 0.9


def test_transformer_block_learns_to_attend():
    tp.manual_seed(3)
    vocab, length = 6, 5
    tokens, targets = first_token_task(n=32, vocab=vocab, length=length)
    model = transformer(nn, vocab, length)
    positions = tp.tensor(np.tile(np.arange(length), (tokens.shape[0], 1)))
    ce = nn.CrossEntropyLoss()

    def loss_fn(logits, target):
        return ce(logits.reshape([-1, vocab]), target.reshape([-1]))

    losses = train(model, loss_fn, (tp.tensor(tokens), positions), tp.tensor(targets), 40,
                   optim.Adam(model.parameters(), lr=3e-3))
    assert losses[-1] < 0.3 * losses[0], losses[::10]


def test_training_trajectory_matches_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    x, y = regression_data(n=64)
    tm = mlp(torch.nn, 4, 16, 1, act="Tanh")
    m = mlp(nn, 4, 16, 1, act="Tanh")
    copy_weights(m, tm)
    topt = torch.optim.Adam(tm.parameters(), lr=1e-2, weight_decay=1e-3, amsgrad=True)
    opt = optim.Adam(m.parameters(), lr=1e-2, weight_decay=1e-3, amsgrad=True)
    ours = train(m, nn.MSELoss(), (tp.tensor(x),), tp.tensor(y), 10, opt)
    theirs = train(tm, torch.nn.MSELoss(), (torch.from_numpy(x),), torch.from_numpy(y), 10, topt)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)
    for (k, v), (_, w) in zip(m.state_dict().items(), tm.state_dict().items()):
        np.testing.assert_allclose(arr(v), w.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


def test_transformer_trajectory_matches_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    vocab, length = 6, 5
    tokens, targets = first_token_task(n=16, vocab=vocab, length=length)
    tm = transformer(torch.nn, vocab, length, dim=16, heads=2)
    m = transformer(nn, vocab, length, dim=16, heads=2)
    copy_weights(m, tm)
    pos = np.tile(np.arange(length), (tokens.shape[0], 1))

    def tp_loss(logits, t):
        return nn.functional.cross_entropy(logits.reshape([-1, vocab]), t.reshape([-1]))

    def torch_loss(logits, t):
        return torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), t.reshape(-1))

    ours = train(m, tp_loss, (tp.tensor(tokens), tp.tensor(pos)), tp.tensor(targets), 5,
                 optim.AdamW(m.parameters(), lr=1e-3))
    theirs = train(tm, torch_loss, (torch.from_numpy(tokens), torch.from_numpy(pos)), torch.from_numpy(targets), 5,
                   torch.optim.AdamW(tm.parameters(), lr=1e-3))
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_checkpoint_resume_continues_identically(tmp_path):
    tp.manual_seed(4)
    x, y = regression_data(n=64)
    X, Y = tp.tensor(x), tp.tensor(y)
    model = mlp(nn, 4, 16, 1)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    train(model, nn.MSELoss(), (X,), Y, 5, opt)
    tp.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "ckpt.tp")
    reference = train(model, nn.MSELoss(), (X,), Y, 5, opt)

    ckpt = tp.load(tmp_path / "ckpt.tp")
    resumed = mlp(nn, 4, 16, 1)
    resumed.load_state_dict(ckpt["model"])
    opt2 = optim.Adam(resumed.parameters(), lr=1e-2)
    opt2.load_state_dict(ckpt["opt"])
    again = train(resumed, nn.MSELoss(), (X,), Y, 5, opt2)
    np.testing.assert_allclose(again, reference, rtol=0, atol=0)


@pytest.mark.parametrize("case", ["example_5_1", "mlp", "transformer_block"])
def test_compiled_steps_keep_no_more_activation_bytes_than_eager_autograd(case):
    # What the autograd graph holds for the backward, each storage once,
    # without the inputs and parameters: the compiled region's saved values
    # against eager's saved inputs/outputs of every node (issue 10's goal).
    from tensorplay.bench import training
    key, title, factory = next(c for c in training.CASES if c[0] == case)
    _, make = factory(True)
    loss_fn, args, params = make(tp)
    keep = [a for a in args if hasattr(a, "data_ptr")] + list(params)
    tp.compiler.reset()
    cf = tp.compile(loss_fn)
    compiled = training.tp_saved_bytes(cf(*args), keep)
    eager = training.tp_saved_bytes(loss_fn(*args), keep)
    assert compiled == tp.compiler.metrics.saved_bytes  # the region's saved activations, nothing else
    # Eager keeps only what each derivative formula reads (OpDef::saved): its
    # layer norms keep their input and recompute the row statistics, where the
    # region's min-cut keeps each norm's rstd ([rows, 1] float32) as well.
    rows = 4 * 32 if case == "transformer_block" else 0
    assert 0 < compiled <= eager + 2 * rows * 4
