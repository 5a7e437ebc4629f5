"""Direct convolution in float64, and the dense kernels that CP and Tucker factors stand for.

This is the definition the fast kernels are checked against (tests, benchmark sanity
checks): Reustle, Rabbani & Huang Eq. 5, V[n,t,y',x'] = Σ_{s,h,w} K[t,s,h,w] ·
U[n, s, y'·stride + h·dil − pad, x'·stride + w·dil − pad], as a loop over the kh·kw taps of a
channel contraction (one ``einsum`` per tap), with zero padding.
"""

from __future__ import annotations

import numpy as np

from gpu.conv.index_tables import conv_geometry

__all__ = ["direct_conv2d", "cp_kernel", "tucker_kernel"]


def direct_conv2d(u, kernel, bias=None, stride=1, padding=0, dilation=1) -> np.ndarray:
    """Float64 cross-correlation of an (N, C, H, W) input with a (T, C, kh, kw) kernel."""
    u = np.asarray(u, dtype=np.float64)
    kernel = np.asarray(kernel, dtype=np.float64)
    g = conv_geometry(u.shape, kernel.shape[2:], stride, padding, dilation)
    pad_b = max(0, (g.out_h - 1) * g.stride_h + g.dil_h * (g.kh - 1) + 1 - g.height - g.pad_top)
    pad_r = max(0, (g.out_w - 1) * g.stride_w + g.dil_w * (g.kw - 1) + 1 - g.width - g.pad_left)
    up = np.pad(u, ((0, 0), (0, 0), (g.pad_top, pad_b), (g.pad_left, pad_r)))
    out = np.zeros((g.batch, kernel.shape[0], g.out_h, g.out_w))
    for h in range(g.kh):
        for w in range(g.kw):
            y0, x0 = h * g.dil_h, w * g.dil_w
            window = up[:, :, y0 : y0 + g.stride_h * (g.out_h - 1) + 1 : g.stride_h,
                        x0 : x0 + g.stride_w * (g.out_w - 1) + 1 : g.stride_w]
            out += np.einsum("ncyx,tc->ntyx", window, kernel[:, :, h, w])
    if bias is not None:
        out += np.asarray(bias, dtype=np.float64)[None, :, None, None]
    return out


def cp_kernel(s, h, w, t) -> np.ndarray:
    """K[t,s,h,w] = Σ_r T[t,r]·S[s,r]·H[h,r]·W[w,r] (Reustle et al. Eq. 6), float64."""
    return np.einsum("tr,sr,hr,wr->tshw", *(np.asarray(f, dtype=np.float64) for f in (t, s, h, w)))


def tucker_kernel(u_in, core, u_out) -> np.ndarray:
    """K[t,c,h,w] = Σ_{d1,d2} core[d2,d1,h,w]·U_in[c,d1]·U_out[t,d2] (Xiang et al. Eq. 1), float64."""
    return np.einsum(
        "cd,ed...,te->tc...",
        np.asarray(u_in, dtype=np.float64),
        np.asarray(core, dtype=np.float64),
        np.asarray(u_out, dtype=np.float64),
    )
