"""HugeCTR's layer arithmetic in numpy, forward and backward: the CPU references of HugeCTR's layer unit tests
(NVIDIA-Merlin/HugeCTR, test/utest/layers/*_test.cpp, and the layer's .cu where the test is thin), written anew from
the formulas (no code of theirs). Each function names the file and release it follows. test_layer_parity.py holds
the translated torch layers against them.

Conventions: float64 arrays; a 2D tensor is (batch, width) as HugeCTR lays it out; weights in HugeCTR's layout
(a fully connected kernel is (in, out)); every backward takes the output's gradient ``dy`` and returns the gradients
of the inputs and weights, as HugeCTR's bprop writes them.
"""

from __future__ import annotations

import numpy as np


def fully_connected(x, kernel, bias, dy, relu=False):
    """InnerProduct / FusedInnerProduct / one layer of MLP: y = act(x @ kernel + bias); backward through the ReLU mask
    (y > 0): dx = g @ kernel^T, dkernel = x^T @ g, dbias = sum of g over the batch. fully_connected_layer_test.cpp,
    fused_relu_bias_fully_connected_layer_test.cpp and mlp_test.cpp (cpu_add_bias_and_re, cpu_reverse_add_bias_and_re)
    of v23.06.01."""
    y = x @ kernel + (bias if bias is not None else 0.0)
    if relu:
        y = np.maximum(y, 0.0)
    g = dy * (y > 0) if relu else dy
    return y, {"x": g @ kernel.T, "kernel": x.T @ g, "bias": g.sum(axis=0) if bias is not None else None}


def mlp(x, kernels, biases, relus, dy):
    """MLP (src/layers/mlp_layer.cu, mlp_test.cpp of v23.06.01): the fully connected layers in turn, each with its own
    bias (or none) and activation (ReLU or none), the last one's included."""
    acts, y = [x], x
    for kernel, bias, relu in zip(kernels, biases, relus):
        y, _ = fully_connected(y, kernel, bias, np.zeros((y.shape[0], kernel.shape[1])), relu)
        acts.append(y)
    grads: dict = {}
    g = dy
    for i in reversed(range(len(kernels))):
        _, gr = fully_connected(acts[i], kernels[i], biases[i], g, relus[i])
        grads[f"kernel{i}"], grads[f"bias{i}"] = gr["kernel"], gr["bias"]
        g = gr["x"]
    grads["x"] = g
    return y, grads


def relu(x, dy):
    """ReLU / ReLUHalf (relu_layer_test.cpp, v23.06.01): max(x, 0); dx = dy where y > 0."""
    y = np.maximum(x, 0.0)
    return y, {"x": dy * (y > 0)}


def sigmoid(x, dy):
    """Sigmoid (sigmoid_layer_test.cpp, v23.06.01): 1 / (1 + exp(-x)); dx = dy * y * (1 - y)."""
    y = 1.0 / (1.0 + np.exp(-x))
    return y, {"x": dy * y * (1.0 - y)}


def elu(x, alpha, dy):
    """ELU (src/layers/elu_layer.cu, elu_layer_test.cpp, v23.06.01): x >= 0: x, else alpha * (exp(x) - 1);
    dx = dy * (x < 0 ? alpha * exp(x) : 1)."""
    y = np.where(x < 0, alpha * (np.exp(x) - 1.0), x)
    return y, {"x": dy * np.where(x < 0, alpha * np.exp(x), 1.0)}


def softmax(x, dy):
    """Softmax over the last dimension (softmax_layer_test.cpp, v23.06.01): y = exp(x - max) / sum;
    dx = y * (dy - sum(dy * y))."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    return y, {"x": y * (dy - (dy * y).sum(axis=-1, keepdims=True))}


def dropout(x, keep, rate, dy):
    """Dropout in training (src/layers/dropout_layer.cu, v23.06.01: scale_ = 1 / (1 - rate)): y = x * keep * scale;
    dx = dy * keep * scale. ``keep`` is the mask of kept elements (cuDNN draws it). In evaluation y = x."""
    scale = 1.0 / (1.0 - rate)
    return x * keep * scale, {"x": dy * keep * scale}


def batch_norm(x, gamma, beta, eps, dy):
    """BatchNorm in training (batch_norm_layer_test.cpp, v23.06.01): per column, the batch mean and the biased
    variance (sum / batch); y = gamma * (x - mean) / sqrt(var + eps) + beta; the backward of its cpu bprop
    (d_var, d_mean, then dx)."""
    n = x.shape[0]
    mean = x.mean(axis=0)
    var = ((x - mean) ** 2).sum(axis=0) / n
    inv = 1.0 / np.sqrt(var + eps)
    xhat = (x - mean) * inv
    y = gamma * xhat + beta
    dxhat = dy * gamma
    d_var = (dxhat * (x - mean)).sum(axis=0) * -0.5 * inv ** 3
    d_mean = -(dxhat * inv).sum(axis=0) + d_var * (-2.0 / n) * (x - mean).sum(axis=0)
    dx = dxhat * inv + d_var * (2.0 / n) * (x - mean) + d_mean / n
    return y, {"x": dx, "gamma": (dy * xhat).sum(axis=0), "beta": dy.sum(axis=0)}


def batch_norm_running(running_mean, running_var, x, factor):
    """BatchNorm's running statistics (src/layers/batch_norm_layer.cu, v23.06.01: cudnnBatchNormalizationForwardTraining
    with exponentialAverageFactor = factor): running = (1 - factor) * running + factor * batch statistic; cuDNN keeps
    the unbiased variance (sum / (batch - 1)) in the running variance. Evaluation normalizes with them."""
    n = x.shape[0]
    mean = x.mean(axis=0)
    var = ((x - mean) ** 2).sum(axis=0) / (n - 1)
    return (1 - factor) * running_mean + factor * mean, (1 - factor) * running_var + factor * var


def layer_norm(x, gamma, beta, eps, dy):
    """LayerNorm over the last dimension (layer_norm_layer_test.cpp, v23.06.01): biased variance,
    y = gamma * (x - mean) / sqrt(var + eps) + beta; the same backward as batch_norm's, per row."""
    w = x.shape[-1]
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    xhat = (x - mean) * inv
    dxhat = dy * gamma
    d_var = (dxhat * (x - mean)).sum(axis=-1, keepdims=True) * -0.5 * inv ** 3
    d_mean = -(dxhat * inv).sum(axis=-1, keepdims=True) + d_var * (-2.0 / w) * (x - mean).sum(axis=-1, keepdims=True)
    dx = dxhat * inv + d_var * (2.0 / w) * (x - mean) + d_mean / w
    rows = tuple(range(x.ndim - 1))
    return gamma * xhat + beta, {"x": dx, "gamma": (dy * xhat).sum(axis=rows), "beta": dy.sum(axis=rows)}


def multi_cross(x0, kernels, biases, dy, projection=None):
    """MultiCross (multi_cross_layer_test.cpp, v23.06.01, cpu_fprop_ and cpu_fprop_v2_). DCN: per layer i a weight
    vector w_i and a bias b_i, x_{i+1} = x0 * (x_i . w_i) + x_i + b_i. DCNv2 (projection_dim, 4.3+): U_i (w, p), V_i
    (p, w), x_{i+1} = x0 * (x_i U_i V_i + b_i) + x_i. The backward is the chain rule of these (the test's cpu_bprop_
    accumulates the same terms)."""
    xs, hs = [x0], []
    for i, b in enumerate(biases):
        xi = xs[-1]
        h = xi @ kernels[i] if projection is None else xi @ kernels[i][0] @ kernels[i][1] + b
        hs.append(h)
        xs.append(x0 * (h[:, None] if projection is None else h) + xi + (b if projection is None else 0.0))
    grads: dict = {}
    g, dx0 = dy, np.zeros_like(x0)
    for i in reversed(range(len(biases))):
        xi, h = xs[i], hs[i]
        grads[f"bias{i}"] = g.sum(axis=0)
        if projection is None:
            dx0 += g * h[:, None]
            dh = (g * x0).sum(axis=1)
            grads[f"kernel{i}"] = xi.T @ dh
            g = g + np.outer(dh, kernels[i])
        else:
            u, v = kernels[i]
            dx0 += g * h
            dh = g * x0
            grads[f"bias{i}"] = dh.sum(axis=0)
            grads[f"v{i}"] = (xi @ u).T @ dh
            grads[f"u{i}"] = xi.T @ (dh @ v.T)
            g = g + dh @ v.T @ u.T
    grads["x"] = g + dx0
    return xs[-1], grads


def interaction(mlp_out, emb, dy):
    """Interaction (interaction_layer_test.cpp, v23.06.01): per sample the features [bottom MLP output, slot vectors]
    (n of them), their dot products; the output is the MLP output, then the products (n, m) with n > m in order of
    n then m (the strictly lower triangle, row by row), then one zero of padding. Backward: the products' gradient
    as a matrix G (zero elsewhere), d features = (G + G^T) @ features, and the MLP part's own gradient added."""
    b, s, w = emb.shape
    feats = np.concatenate([mlp_out[:, None, :], emb], axis=1)
    dots = feats @ feats.transpose(0, 2, 1)
    rows, cols = np.tril_indices(s + 1, -1)
    y = np.concatenate([mlp_out, dots[:, rows, cols], np.zeros((b, 1))], axis=1)
    g = np.zeros_like(dots)
    g[:, rows, cols] = dy[:, w:w + len(rows)]
    dfeats = (g + g.transpose(0, 2, 1)) @ feats
    return y, {"mlp": dy[:, :w] + dfeats[:, 0], "emb": dfeats[:, 1:]}


def fm_order2(x, out_dim, dy):
    """FmOrder2 (fm_order2_layer_test.cpp, v23.06.01): x holds slots of out_dim factors;
    y_k = 0.5 * ((sum_s v_sk)^2 - sum_s v_sk^2); dx_sk = dy_k * (sum_s v_sk - v_sk)."""
    v = x.reshape(x.shape[0], -1, out_dim)
    total = v.sum(axis=1)
    y = 0.5 * (total ** 2 - (v * v).sum(axis=1))
    return y, {"x": (dy[:, None, :] * (total[:, None, :] - v)).reshape(x.shape)}


def weight_multiply(x, weight, dy):
    """WeightMultiply (weight_multiply_layer_test.cpp, v23.06.01): y[b, d * k + j] = x[b, d] * W[d, j];
    dx[b, d] = sum_j dy * W, dW[d, j] = sum_b dy * x."""
    rows, cols = weight.shape
    y = (x[:, :, None] * weight).reshape(x.shape[0], -1)
    g = dy.reshape(x.shape[0], rows, cols)
    return y, {"x": (g * weight).sum(axis=2), "weight": (g * x[:, :, None]).sum(axis=0)}


def reduce(x, axis, mean, dy):
    """ReduceSum / ReduceMean (reduce_sum_layer_test.cpp, reduce_mean_layer_test.cpp, v23.06.01): the sum (mean)
    over `axis` (the batch is axis 0), kept as a dimension of 1; dx = dy broadcast (divided by its length)."""
    n = x.shape[axis]
    y = x.sum(axis=axis, keepdims=True) / (n if mean else 1)
    return y, {"x": np.broadcast_to(dy / (n if mean else 1), x.shape).copy()}


def select(x, dim, index, dy):
    """Select (select_layer_test.cpp and src/layers/select_layer.cu, v23.08.00 - v25.03.00): the entries `index`
    of dimension `dim` (not 0, the batch); the backward writes dy back to those entries. HugeCTR's bprop writes in
    place and leaves the rest of the input buffer as it was; the gradient of entries not selected is 0 here."""
    y = np.take(x, index, axis=dim)
    dx = np.zeros_like(x)
    np.moveaxis(dx, dim, 0)[list(index)] = np.moveaxis(dy, dim, 0)
    return y, {"x": dx}


def elementwise(xs, op, dy):
    """Add, Sub, ElementwiseMultiply (add_layer_test.cpp, sub_layer_test.cpp, elementwise_multiply_layer_test.cpp,
    v23.06.01): y = x0 + x1 + ..., x0 - x1, x0 * x1 * ...; dx_i = dy, (dy, -dy), dy * product of the others."""
    if op == "Add":
        return sum(xs), {f"x{i}": dy for i in range(len(xs))}
    if op == "Sub":
        return xs[0] - xs[1], {"x0": dy, "x1": -dy}
    y = np.prod(np.stack(xs), axis=0)
    return y, {f"x{i}": dy * np.prod(np.stack([x for j, x in enumerate(xs) if j != i]), axis=0)
               for i in range(len(xs))}


def binary_cross_entropy(x, label):
    """BinaryCrossEntropyLoss (src/loss.cu, BinaryCrossEntropyLoss::do_compute, v23.06.01): the mean over the batch
    of -(t log s + (1 - t) log(1 - s)), s = sigmoid(x); the gradient (s - t) / batch (before the solver's scaler)."""
    s = 1.0 / (1.0 + np.exp(-x))
    loss = -(label * np.log(s) + (1 - label) * np.log(1 - s)).mean()
    return loss, {"x": (s - label) / x.shape[0]}


# ---- losses (src/loss.cu, test/utest/loss/*.cpp) ----------------------------------------------------------------------

def cross_entropy_loss(x: np.ndarray, label: np.ndarray) -> tuple[float, np.ndarray]:
    """CrossEntropyLoss of x (B, 2): cross_entropy_loss() of loss_test.cpp (v23.06.01) and CrossEntropy_Kernel
    (loss.cu): a0, a1 the softmax of a row, class 1 where label[i] (the label tensor read flat) >= 0.5; loss the mean
    of -log a_class, dx = (a - one-hot) / B."""
    b = x.shape[0]
    flat = label.reshape(-1)
    loss, dx = 0.0, np.zeros_like(x)
    for i in range(b):
        e = np.exp(x[i])
        a = e / e.sum()
        c = 1 if flat[i] >= 0.5 else 0
        loss += -np.log(a[c])
        dx[i] = (a - np.eye(2)[c]) / b
    return loss / b, dx


def multi_cross_entropy_loss(x: np.ndarray, label: np.ndarray, weights: list[float]) -> tuple[float, np.ndarray]:
    """MultiCrossEntropyLoss: MultiCrossEntropy_Kernel (loss.cu, v23.06.01) and multi_cross_entropy_loss_test.cpp:
    element i of x (B, N) has target weight w[i mod N]; a label below -0.5 adds no loss and no gradient; the loss is
    Σ w BCE / (B N), dx = w (σ(x) - y) / (B N)."""
    size = x.size
    loss, dx = 0.0, np.zeros_like(x)
    for (i, j), v in np.ndenumerate(x):
        y = label[i, j]
        if y < -0.5:
            continue
        bce = v * (1 - y) + np.log1p(np.exp(-v)) if v >= 0 else -v * y + np.log1p(np.exp(v))
        loss += weights[j] * bce
        dx[i, j] = weights[j] * (1 / (1 + np.exp(-v)) - y) / size
    return loss / size, dx


def binary_cross_entropy_loss(x: np.ndarray, label: np.ndarray) -> tuple[float, np.ndarray]:
    """BinaryCrossEntropyLoss of x (B, 1): binary_cross_entropy_loss() of loss_test.cpp (v23.06.01): the mean of
    x (1 - y) + log(1 + e^-x), dx = (σ(x) - y) / B."""
    p = 1 / (1 + np.exp(-x))
    loss = np.mean(np.where(x >= 0, x * (1 - label) + np.log1p(np.exp(-np.abs(x))),
                            -x * label + np.log1p(np.exp(-np.abs(x)))))
    return float(loss), (p - label) / x.shape[0]
