// First mode product of an FP16 Kronecker-scaled TTMc with the scaling in its loads.
//
// Y[p, a, q] = sum_i U~[a, i] * fp16(X[p, i, q] * f_row[p*I + i] * f_col[q]),
// with the FP16 rounding of X~ = X x_1 D_1 ... x_N D_N (poster "TTMc in low precision on
// GPUs", Section 2) done on the way into shared memory, FP16 products and FP32
// accumulation on the tensor cores (mma.sync m16n8k16), the result stored in FP16. The
// same loads give sum X^2 (the bound's ||X||_F) and max |X~| (the measured headroom), so X
// is read once and X~ never written. numba cannot emit tensor-core instructions, so this
// file holds the block's work as device functions (numba's foreign-function ABI: an int
// status, the return slot first) and gpu/ttmc_scaled_ttm.py launches them from numba.cuda
// kernels. Layout: X is float32, C-ordered (P, I, Q) with Q % 4 == 0; U~ is (16*MT) x Kpad FP16,
// zero-padded; Y is (P, J, Q) FP16. One block of 256 threads takes 128 columns q of one p
// and all J rows, stepping over i in chunks of 32: the next chunk's loads are in flight
// while the tensor cores work on the current one.

#define BN 128
#define BK 32
#define THREADS 256
#define A_STRIDE (BK + 8)   // halves; 80-byte rows: ldmatrix rows fall in distinct banks
#define B_STRIDE (BN + 8)   // halves; 272-byte rows: likewise

typedef unsigned short half_t;

__device__ __forceinline__ unsigned pack_half2(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ unsigned smem_addr(const void* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void ldmatrix_x4(unsigned* r, const void* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned* r, const void* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_16816(float* c, const unsigned* a, unsigned b0, unsigned b1)
{
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float4 load4(const float* x, long long at)
{
    return __ldcs(reinterpret_cast<const float4*>(x + at));
}

// MT: 16-row tiles of U~ (J <= 16*MT); WM: warps along the rows (8 / WM along the columns).
template <int MT, int WM>
__device__ void scaled_ttm(const float* __restrict__ x, const half_t* __restrict__ u, half_t* __restrict__ y,
                           const float* __restrict__ f_row, const float* __restrict__ f_col,
                           double* scan, long long P, long long I, long long Q, long long J, long long Kpad)
{
    constexpr int WN = 8 / WM;
    constexpr int M_TILES = MT / WM;        // 16-row tiles per warp
    constexpr int N_TILES = BN / WN / 8;    // 8-column tiles per warp
    constexpr int A_CHUNKS = MT * 16 * BK / 8;  // 16-byte pieces of a U~ tile
    constexpr int A_PER_THREAD = (A_CHUNKS + THREADS - 1) / THREADS;

    __shared__ __align__(16) half_t As[MT * 16 * A_STRIDE];
    __shared__ __align__(16) half_t Bs[BK * B_STRIDE];
    __shared__ double red_ss[THREADS / 32];
    __shared__ float red_top[THREADS / 32];

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int warp_m = warp % WM;
    const int warp_n = warp / WM;

    const long long tiles_q = (Q + BN - 1) / BN;
    const long long p = blockIdx.x / tiles_q;
    const long long q0 = (blockIdx.x - p * tiles_q) * BN;

    // Loader: thread takes 4 columns (one float4) of rows r0, r0+8, r0+16, r0+24 of each chunk.
    const int col = (tid & 31) * 4;
    const int r0 = tid >> 5;
    const bool col_in = q0 + col < Q;
    float4 fc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (col_in) fc = *reinterpret_cast<const float4*>(f_col + q0 + col);

    float4 xv[4];
    float fr[4];
    uint4 av[A_PER_THREAD];
    float acc[M_TILES][N_TILES][4];
#pragma unroll
    for (int a = 0; a < M_TILES; ++a)
#pragma unroll
        for (int b = 0; b < N_TILES; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.f;

    double ss = 0.0;
    float top = 0.f;
    const long long n_chunks = Kpad / BK;

    auto load_chunk = [&](long long k0) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const long long i = k0 + r0 + 8 * j;
            if (col_in && i < I) {
                xv[j] = load4(x, (p * I + i) * Q + q0 + col);
                fr[j] = __ldg(f_row + p * I + i);
            } else {
                xv[j] = make_float4(0.f, 0.f, 0.f, 0.f);
                fr[j] = 0.f;
            }
        }
#pragma unroll
        for (int j = 0; j < A_PER_THREAD; ++j) {
            const int piece = tid + j * THREADS;
            if (piece < A_CHUNKS) {
                const int row = piece / (BK / 8), part = piece % (BK / 8);
                av[j] = __ldg(reinterpret_cast<const uint4*>(u + row * Kpad + k0 + part * 8));
            }
        }
    };

    load_chunk(0);
    for (long long kc = 0; kc < n_chunks; ++kc) {
        // Scale, measure and round the chunk into shared memory (the products f_row*f_col are
        // powers of two in float32's normal range, so only the FP16 cast rounds).
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float4 v = xv[j];
            ss += (double)v.x * v.x + (double)v.y * v.y + (double)v.z * v.z + (double)v.w * v.w;
            const float s0 = v.x * (fr[j] * fc.x), s1 = v.y * (fr[j] * fc.y);
            const float s2 = v.z * (fr[j] * fc.z), s3 = v.w * (fr[j] * fc.w);
            top = fmaxf(top, fmaxf(fmaxf(fabsf(s0), fabsf(s1)), fmaxf(fabsf(s2), fabsf(s3))));
            uint2 packed = make_uint2(pack_half2(s0, s1), pack_half2(s2, s3));
            *reinterpret_cast<uint2*>(&Bs[(r0 + 8 * j) * B_STRIDE + col]) = packed;
        }
#pragma unroll
        for (int j = 0; j < A_PER_THREAD; ++j) {
            const int piece = tid + j * THREADS;
            if (piece < A_CHUNKS) {
                const int row = piece / (BK / 8), part = piece % (BK / 8);
                *reinterpret_cast<uint4*>(&As[row * A_STRIDE + part * 8]) = av[j];
            }
        }
        __syncthreads();
        if (kc + 1 < n_chunks) load_chunk((kc + 1) * BK);

#pragma unroll
        for (int ks = 0; ks < BK; ks += 16) {
            unsigned bfrag[N_TILES][2];
#pragma unroll
            for (int b = 0; b < N_TILES; b += 2) {
                // x4.trans: k rows 0-7 / 8-15 of 8-column tiles b and b+1 -> col-major fragments.
                const int mi = lane >> 3;
                const int krow = ks + (mi & 1) * 8 + (lane & 7);
                const int ncol = warp_n * (BN / WN) + (b + (mi >> 1)) * 8;
                unsigned r[4];
                ldmatrix_x4_trans(r, &Bs[krow * B_STRIDE + ncol]);
                bfrag[b][0] = r[0];
                bfrag[b][1] = r[1];
                bfrag[b + 1][0] = r[2];
                bfrag[b + 1][1] = r[3];
            }
#pragma unroll
            for (int a = 0; a < M_TILES; ++a) {
                const int mrow = (warp_m * M_TILES + a) * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
                const int kcol = ks + (lane >> 4) * 8;
                unsigned afrag[4];
                ldmatrix_x4(afrag, &As[mrow * A_STRIDE + kcol]);
#pragma unroll
                for (int b = 0; b < N_TILES; ++b) mma_16816(acc[a][b], afrag, bfrag[b][0], bfrag[b][1]);
            }
        }
        __syncthreads();
    }

    // Accumulator (row g / g+8, columns 2c, 2c+1 of each 16x8 tile) -> FP16 pairs in Y.
    const int g = lane >> 2, c2 = (lane & 3) * 2;
#pragma unroll
    for (int a = 0; a < M_TILES; ++a) {
#pragma unroll
        for (int b = 0; b < N_TILES; ++b) {
            const long long q = q0 + warp_n * (BN / WN) + b * 8 + c2;
            if (q >= Q) continue;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const long long row = (warp_m * M_TILES + a) * 16 + g + 8 * h;
                if (row < J)
                    *reinterpret_cast<unsigned*>(y + (p * J + row) * Q + q) =
                        pack_half2(acc[a][b][2 * h], acc[a][b][2 * h + 1]);
            }
        }
    }

    // Block totals: sum X^2 added, max |X~| maxed (non-negative doubles order as their bits).
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        ss += __shfl_xor_sync(0xffffffffu, ss, off);
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, off));
    }
    if (lane == 0) {
        red_ss[warp] = ss;
        red_top[warp] = top;
    }
    __syncthreads();
    if (tid == 0) {
        double total = 0.0;
        float peak = 0.f;
        for (int w = 0; w < THREADS / 32; ++w) {
            total += red_ss[w];
            peak = fmaxf(peak, red_top[w]);
        }
        atomicAdd(scan, total);
        atomicMax(reinterpret_cast<unsigned long long*>(scan + 1),
                  (unsigned long long)__double_as_longlong((double)peak));
    }
}

#define ENTRY(NAME, MT, WM)                                                                          \
    extern "C" __device__ int NAME(int* status, unsigned long long x, unsigned long long u,             \
                                   unsigned long long y, unsigned long long f_row,                      \
                                   unsigned long long f_col, unsigned long long scan, long long P,       \
                                   long long I, long long Q, long long J, long long Kpad)               \
    {                                                                                                    \
        scaled_ttm<MT, WM>(reinterpret_cast<const float*>(x), reinterpret_cast<const half_t*>(u),        \
                              reinterpret_cast<half_t*>(y), reinterpret_cast<const float*>(f_row),      \
                              reinterpret_cast<const float*>(f_col), reinterpret_cast<double*>(scan),   \
                              P, I, Q, J, Kpad);                                                         \
        *status = 0;                                                                                     \
        return 0;                                                                                        \
    }

ENTRY(scaled_ttm_m1, 1, 1)
ENTRY(scaled_ttm_m2, 2, 1)
ENTRY(scaled_ttm_m4, 4, 2)
ENTRY(scaled_ttm_m8, 8, 2)
