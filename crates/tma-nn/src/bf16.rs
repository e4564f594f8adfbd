//! The link decoder's products in bf16 with f32 accumulation ([`MatmulPrecision::Medium`],
//! `--matmul-precision medium`), on Intel AMX (`tdpbf16ps`) when the CPU and kernel allow it,
//! else on AVX512_BF16 dot products (`vdpbf16ps`, [`Backend::Avx512Bf16`]: AMD Zen 4 and later)
//! over the same packed operands (docs/decisions/0030-avx512-bf16.md).
//!
//! Why: a link step's three `[B, d]·[d, d]` decoder products (`B` = 2 × batch pairs, `d` =
//! hidden) are most of its arithmetic (51 of ~63 GFLOP per amazon_photo step at batch 65536,
//! d = 256), and a link validation scores 1000 × 1001 pairs through the same product (~131
//! GFLOP). In f32 they run at the `gemm` crate's 400-457 GFLOP/s on 2 cores; one AMX core
//! peaks at ~3 TFLOP/s in bf16. The products here are fused with what surrounds them (the
//! Hadamard product of the endpoint embeddings, the bias, PReLU and the second linear layer), so
//! the `[B, d]` operand `z = h_u ⊙ h_v` is never written to memory in f32.
//!
//! Numerics (as PyTorch's `torch.set_float32_matmul_precision("medium")` / bf16 autocast): each
//! operand of the three products is rounded to bf16 (8-bit mantissa, round to nearest even),
//! products are exact in f32 and summed in f32. Everything else (embeddings, `u`, the
//! gradients' other terms, the parameters and Adam) stays f32. Results differ from the f32 path
//! by bf16 rounding (relative ~2⁻⁹ per operand), and the tile unit's summation order; they are
//! the same bytes for the same inputs whatever the thread count (fixed chunks, summed in order).
//!
//! Layout (Intel SDM, AMX): a tile is 16 rows × 64 bytes. `A` tiles hold 16 rows × 32 bf16 of a
//! row-major `[rows, kp]` block; `B` tiles hold 16 rows × 16 columns × 2 bf16 ("VNNI" pairs:
//! row `r`, column `c` holds `B[2r][c], B[2r+1][c]` of a 32-deep slice of `K`); `C` tiles 16 ×
//! 16 f32. The micro-kernel keeps a 2 × 2 grid of `C` tiles (32 × 32 outputs) and walks `K` in
//! steps of 32. Shapes are padded with zeros to multiples of 32.
//!
//! A link training step takes [`train_bce`] ([`crate::Model::decode_bce`]): forward, BCE
//! loss and backward per sub-block of 512 pairs, so `u` never leaves the thread's buffer. The
//! row work around the tile products (rounding, the epilogue, transposes, packing) runs in
//! explicit AVX-512 on AMX machines (`mod x86`), the same bits as the portable code.
//!
//! Without either, [`bf16_products`] is `None` and the model keeps f32 ([`crate::Model`] says so);
//! the same code runs with a scalar emulation of the tile product ([`Backend::Emulated`]) in
//! the tests, so the fused decoder is checked on every machine.

use crate::kernels::{prelu1, prelu_grad1};
use crate::Mat;
use rayon::prelude::*;

/// Precision of the link decoder's matrix products (the names of PyTorch's
/// `torch.set_float32_matmul_precision`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MatmulPrecision {
    /// f32 operands and accumulation (the `gemm` crate). The default.
    #[default]
    Highest,
    /// bf16 operands, f32 accumulation, on AMX tiles; falls back to [`Highest`](Self::Highest)
    /// where the CPU has no AMX-BF16 (said by [`crate::Model::set_matmul_precision`]).
    Medium,
}

impl MatmulPrecision {
    /// `"highest"` or `"medium"`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatmulPrecision::Highest => "highest",
            MatmulPrecision::Medium => "medium",
        }
    }
}

impl std::str::FromStr for MatmulPrecision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "highest" => Ok(MatmulPrecision::Highest),
            "medium" => Ok(MatmulPrecision::Medium),
            _ => Err(format!(
                "unknown matmul precision {s:?} (expected highest or medium)"
            )),
        }
    }
}

impl std::fmt::Display for MatmulPrecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the tile product runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// AMX tiles (`tdpbf16ps`); only when [`amx_available`].
    Amx,
    /// AVX-512 BF16 dot products (`vdpbf16ps`: two bf16 products summed into each f32 lane)
    /// on the same packed operands; only when [`avx512_bf16_available`]. For CPUs with
    /// AVX512_BF16 but no AMX (AMD Zen 4 and later, Intel Cooper Lake): twice the f32 FMA's
    /// multiply-adds per instruction.
    Avx512Bf16,
    /// The same product in scalar code (bf16 operands, f32 sums): tests on any CPU.
    #[cfg_attr(not(test), allow(dead_code))]
    Emulated,
}

/// Rows per block: two 16-row tiles.
const RB: usize = 32;
/// Batch rows per sub-block of the weight-gradient product (its `K`).
const SB: usize = 512;
/// Rows of the batch per partial weight gradient (at least; see [`backward`]).
const CHUNK: usize = 2048;
/// Most partial weight gradients in [`backward`].
const MAX_PARTS: usize = 64;

/// Multiply-adds below which a product stays f32 on AMX: packing the operands and the padding
/// to 32 cost more than the product (a fresh user measured 1.8x slower steps at batch size 1).
const MIN_TILE_MACS: usize = 1 << 22;
/// Rows (the batch dimension) below which a product stays f32 on AMX: packing the weight
/// (`k × n` roundings) costs more than a product over so few rows.
const MIN_TILE_ROWS: usize = 512;

/// Whether a product of `macs` multiply-adds over `rows` batch rows runs on `backend`'s tiles:
/// on AMX and AVX512_BF16 from [`MIN_TILE_ROWS`] rows and [`MIN_TILE_MACS`] multiply-adds on
/// (the choice depends on the shape only, so runs stay reproducible); always on the emulation
/// (tests).
pub(crate) fn tiles_pay(backend: Backend, rows: usize, macs: usize) -> bool {
    backend == Backend::Emulated || (rows >= MIN_TILE_ROWS && macs >= MIN_TILE_MACS)
}

impl Backend {
    /// Whether the row code around the products runs in explicit AVX-512 (`mod x86`): on both
    /// hardware backends, whose detection checked AVX-512F/BW/VL and FMA.
    fn wide(self) -> bool {
        matches!(self, Backend::Amx | Backend::Avx512Bf16)
    }
}

/// The fastest bf16 product this process can run: AMX tiles where [`amx_available`], else
/// AVX512_BF16 dot products where [`avx512_bf16_available`], else none (f32).
pub(crate) fn hardware_backend() -> Option<Backend> {
    if amx_available() {
        Some(Backend::Amx)
    } else if avx512_bf16_available() {
        Some(Backend::Avx512Bf16)
    } else {
        None
    }
}

/// Which hardware runs `--matmul-precision medium`'s bf16 products here, as `summary.json`'s
/// `matmul_products` names it: `"bf16-amx"` (Intel AMX tiles), `"bf16-avx512"` (AVX512_BF16
/// dot products, e.g. AMD Zen 4) or `None` (no bf16 product: medium falls back to f32).
pub fn bf16_products() -> Option<&'static str> {
    hardware_backend().map(|b| match b {
        Backend::Amx => "bf16-amx",
        _ => "bf16-avx512",
    })
}

/// Whether this CPU has AVX512_BF16 (`vdpbf16ps`) with AVX-512F/BW/VL and FMA (the row code's
/// instructions). Asked once per process.
pub fn avx512_bf16_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("avx512bf16")
                && std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("fma")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// `x` rounded to bf16 (round to nearest, ties to even), as its 16 bits.
#[inline(always)]
pub(crate) fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// The f32 value of bf16 bits.
#[inline(always)]
pub(crate) fn from_bf16(v: u16) -> f32 {
    f32::from_bits((v as u32) << 16)
}

fn round_up(x: usize, m: usize) -> usize {
    x.div_ceil(m) * m
}

/// Whether this process can use AMX-BF16: CPUID leaf 7 reports AMX-TILE and AMX-BF16 and the
/// kernel grants the tile data state (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`,
/// Linux ≥ 5.16). Asked once per process.
pub fn amx_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(detect_amx)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn detect_amx() -> bool {
    // cpuid is present on every x86_64 CPU; leaf 7 is read only when the max leaf is >= 7
    let max_leaf = std::arch::x86_64::__cpuid(0).eax;
    let edx7 = if max_leaf >= 7 {
        std::arch::x86_64::__cpuid_count(7, 0).edx
    } else {
        0
    };
    if edx7 & (1 << 22) == 0 || edx7 & (1 << 24) == 0 {
        return false;
    }
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    let ret: i64;
    // SAFETY: the arch_prctl system call only changes this process's permission to use the
    // tile state; rcx and r11 are clobbered by `syscall`.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL => ret,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret == 0
        && std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vl")
        && std::is_x86_feature_detected!("fma")
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn detect_amx() -> bool {
    false
}

/// The `B` operand of a product, bf16 in tiles: `[nt][kc][16][16][2]` for `K = 32·kc` rows and
/// `N = 16·nt` columns (`nt` even), zero beyond the real `k × n`.
pub(crate) struct PackedB {
    data: Vec<u16>,
    kc: usize,
    nt: usize,
}

impl PackedB {
    fn zeros(k: usize, n: usize) -> PackedB {
        let (kc, nt) = (round_up(k.max(1), 32) / 32, round_up(n.max(1), 32) / 16);
        PackedB {
            data: vec![0; nt * kc * 512],
            kc,
            nt,
        }
    }

    #[inline(always)]
    fn index(&self, k: usize, n: usize) -> usize {
        (((n / 16) * self.kc + k / 32) * 16 + (k % 32) / 2) * 32 + (n % 16) * 2 + (k % 2)
    }

    /// `B[k][n] = f(k, n)` for `k < k_rows`, `n < n_cols` (small operands: the weights).
    pub(crate) fn from_fn(k_rows: usize, n_cols: usize, f: impl Fn(usize, usize) -> f32) -> Self {
        let mut b = PackedB::zeros(k_rows, n_cols);
        for k in 0..k_rows {
            for n in 0..n_cols {
                let i = b.index(k, n);
                b.data[i] = to_bf16(f(k, n));
            }
        }
        b
    }

    fn cols(&self) -> usize {
        self.nt * 16
    }

    /// `B[k][n] = src[k · n_cols + n]` (`src` row-major `[k_rows, n_cols]`), as [`from_fn`]
    /// gives it; in AVX-512 on AMX machines.
    ///
    /// [`from_fn`]: PackedB::from_fn
    fn of_rows(backend: Backend, src: &[f32], k_rows: usize, n_cols: usize) -> Self {
        assert!(src.len() >= k_rows * n_cols, "PackedB::rows extents");
        #[cfg(target_arch = "x86_64")]
        if backend.wide() {
            let mut b = PackedB::zeros(k_rows, n_cols);
            // SAFETY: the backend's detection checked AVX-512F/BW/VL; extents checked.
            unsafe { x86::pack_rows(&mut b, src, k_rows, n_cols) };
            return b;
        }
        let _ = backend;
        PackedB::from_fn(k_rows, n_cols, |k, n| src[k * n_cols + n])
    }

    /// `B[k][n] = src[n · k_rows + k]` (`src` row-major `[n_cols, k_rows]`: a weight
    /// `[out, in]` as the `B` of `x · Wᵀ`), as [`from_fn`] gives it; in AVX-512 on AMX machines.
    ///
    /// [`from_fn`]: PackedB::from_fn
    fn of_cols(backend: Backend, src: &[f32], k_rows: usize, n_cols: usize) -> Self {
        assert!(src.len() >= k_rows * n_cols, "PackedB::cols extents");
        #[cfg(target_arch = "x86_64")]
        if backend.wide() {
            let mut b = PackedB::zeros(k_rows, n_cols);
            // SAFETY: the backend's detection checked AVX-512F/BW/VL; extents checked.
            unsafe { x86::pack_cols(&mut b, src, k_rows, n_cols) };
            return b;
        }
        let _ = backend;
        PackedB::from_fn(k_rows, n_cols, |k, n| src[n * k_rows + k])
    }
}

/// AMX tile configuration: palette 1, tiles 0-7 all 16 rows × 64 bytes.
#[cfg(target_arch = "x86_64")]
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

/// Load the tile configuration on the calling thread (per-thread state; cheap).
#[cfg(target_arch = "x86_64")]
fn configure_tiles() {
    let mut c = [0u8; 64];
    c[0] = 1;
    for t in 0..8 {
        c[16 + 2 * t] = 64;
        c[48 + t] = 16;
    }
    let cfg = TileConfig(c);
    // SAFETY: only called when amx_available(); the configuration is valid for palette 1.
    unsafe {
        std::arch::asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly));
    }
}

/// `C[32, N] (+)= A[32, K] · B`: `a` row-major bf16 with row stride `b.kc·32`, `c` row-major
/// f32 with row stride `ldc ≥ b.cols()`; `acc` adds to `c` instead of overwriting it.
fn block(backend: Backend, a: &[u16], b: &PackedB, c: &mut [f32], ldc: usize, acc: bool) {
    let kp = b.kc * 32;
    assert!(a.len() >= RB * kp && ldc >= b.cols() && c.len() >= (RB - 1) * ldc + b.cols());
    match backend {
        #[cfg(target_arch = "x86_64")]
        Backend::Amx => {
            debug_assert!(amx_available());
            // SAFETY: extents checked above; tiles configured by the caller on this thread.
            unsafe { block_amx(a.as_ptr(), kp, b, c.as_mut_ptr(), ldc, acc) }
        }
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512Bf16 => {
            debug_assert!(avx512_bf16_available());
            // SAFETY: extents checked above; avx512_bf16_available() checked the features.
            unsafe { x86::block_dpbf16(a.as_ptr(), kp, b, c.as_mut_ptr(), ldc, acc) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Backend::Amx | Backend::Avx512Bf16 => unreachable!("AMX / AVX-512 on a non-x86_64 build"),
        Backend::Emulated => {
            for i in 0..RB {
                let ar = &a[i * kp..(i + 1) * kp];
                for n in 0..b.cols() {
                    let mut s = if acc { c[i * ldc + n] } else { 0.0 };
                    for (k, &av) in ar.iter().enumerate() {
                        s += from_bf16(av) * from_bf16(b.data[b.index(k, n)]);
                    }
                    c[i * ldc + n] = s;
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
unsafe fn block_amx(a: *const u16, kp: usize, b: &PackedB, c: *mut f32, ldc: usize, acc: bool) {
    let kc = b.kc;
    for n2 in 0..b.nt / 2 {
        let b0 = b.data.as_ptr().add(2 * n2 * kc * 512);
        let b1 = b.data.as_ptr().add((2 * n2 + 1) * kc * 512);
        let c0 = c.add(n2 * 32);
        std::arch::asm!(
            "test {acc}, {acc}",
            "jz 3f",
            "tileloadd tmm0, [{c0} + {sc}]",
            "tileloadd tmm1, [{c1} + {sc}]",
            "tileloadd tmm2, [{c2} + {sc}]",
            "tileloadd tmm3, [{c3} + {sc}]",
            "jmp 2f",
            "3:",
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            "2:",
            "tileloadd tmm4, [{a0} + {sa}]",
            "tileloadd tmm6, [{b0} + {s64}]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            "tileloadd tmm7, [{b1} + {s64}]",
            "tdpbf16ps tmm1, tmm4, tmm7",
            "tileloadd tmm5, [{a1} + {sa}]",
            "tdpbf16ps tmm2, tmm5, tmm6",
            "tdpbf16ps tmm3, tmm5, tmm7",
            "add {a0}, 64",
            "add {a1}, 64",
            "add {b0}, 1024",
            "add {b1}, 1024",
            "dec {k}",
            "jnz 2b",
            "tilestored [{c0} + {sc}], tmm0",
            "tilestored [{c1} + {sc}], tmm1",
            "tilestored [{c2} + {sc}], tmm2",
            "tilestored [{c3} + {sc}], tmm3",
            acc = in(reg) acc as usize,
            a0 = inout(reg) a => _,
            a1 = inout(reg) a.add(16 * kp) => _,
            b0 = inout(reg) b0 => _,
            b1 = inout(reg) b1 => _,
            sa = in(reg) kp * 2,
            s64 = in(reg) 64usize,
            sc = in(reg) ldc * 4,
            k = inout(reg) kc => _,
            c0 = in(reg) c0,
            c1 = in(reg) c0.add(16),
            c2 = in(reg) c0.add(16 * ldc),
            c3 = in(reg) c0.add(16 * ldc + 16),
            options(nostack),
        );
    }
}

/// Per-thread set-up of a parallel task.
fn begin(backend: Backend) {
    #[cfg(target_arch = "x86_64")]
    if backend == Backend::Amx {
        configure_tiles();
    }
    let _ = backend;
}

/// `fn $name(backend, args..)`: calls the `#[inline(always)]` row code `$body(args..)` through
/// a copy compiled for AVX-512 when the tile product runs on AMX (every AMX CPU has
/// AVX-512F/BW/VL and FMA; [`amx_available`] checks them), else the baseline build.
macro_rules! wide_fn {
    ($name:ident = $body:ident($($a:ident: $t:ty),* $(,)?) $(-> $r:ty)?) => {
        #[allow(clippy::too_many_arguments)]
        fn $name(backend: Backend, $($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn wide($($a: $t),*) $(-> $r)? {
                    $body($($a),*)
                }
                if backend.wide() {
                    // SAFETY: the backend's detection checked AVX-512F/BW/VL and FMA.
                    return unsafe { wide($($a),*) };
                }
            }
            let _ = backend;
            $body($($a),*)
        }
    };
}

/// [`hadamard_rows`], in explicit AVX-512 on AMX machines (the same arithmetic: same bits).
fn hadamard_rows_w(backend: Backend, h: &Mat, src: &[u32], dst: &[u32], a: &mut [u16], kp: usize) {
    #[cfg(target_arch = "x86_64")]
    if backend.wide() {
        // SAFETY: the backend's detection checked AVX-512F/BW/VL.
        return unsafe { x86::hadamard_rows(h, src, dst, a, kp) };
    }
    let _ = backend;
    hadamard_rows(h, src, dst, a, kp)
}

/// [`logits_rows`], in explicit AVX-512 on AMX machines (the same arithmetic: same bits).
fn logits_rows_w(
    backend: Backend,
    c: &[f32],
    np: usize,
    p: &DecoderParams,
    out: &mut [f32],
    u: Option<&mut [f32]>,
) {
    #[cfg(target_arch = "x86_64")]
    if backend.wide() {
        // SAFETY: the backend's detection checked AVX-512F/BW/VL.
        return unsafe { x86::logits_rows(c, np, p, out, u) };
    }
    let _ = backend;
    logits_rows(c, np, p, out, u)
}
wide_fn!(backward_chunk_w = backward_chunk(
    tiles: Backend, s: &mut Scratch, h: &Mat, src: &[u32], dst: &[u32], u: &[f32], d_logits: &[f32],
    p: &DecoderParams, w1: &PackedB, row0: usize, dz: &mut [f32], part: &mut [f32]
));

/// The decoder's parameters, borrowed from the flat parameter buffer.
pub(crate) struct DecoderParams<'a> {
    /// `W1` `[d, d]` (`[out, in]`).
    pub w1: &'a [f32],
    pub b1: &'a [f32],
    pub slope: f32,
    pub w2: &'a [f32],
    pub b2: f32,
}

/// Fill `a` (`[32, kp]` bf16) with the rounded `h_u ⊙ h_v` of up to 32 pairs; rows past the
/// pairs are zeroed.
#[inline(always)]
fn hadamard_rows(h: &Mat, src: &[u32], dst: &[u32], a: &mut [u16], kp: usize) {
    let d = h.cols;
    for i in 0..RB {
        let row = &mut a[i * kp..i * kp + d];
        if i < src.len() {
            let (x, y) = (h.row(src[i] as usize), h.row(dst[i] as usize));
            for ((o, x), y) in row.iter_mut().zip(x).zip(y) {
                *o = to_bf16(x * y);
            }
        } else {
            row.fill(0);
        }
    }
}

/// Logits of up to 32 rows from the product block `c` (`[32, np]`): `b2 + w2 · PReLU(c + b1)`;
/// `u` (when given, `[rows, d]`) receives `c + b1`. The dot product runs in 16 lanes (summed in
/// lane order, then the tail), so it vectorizes.
#[inline(always)]
fn logits_rows(
    c: &[f32],
    np: usize,
    p: &DecoderParams,
    out: &mut [f32],
    mut u: Option<&mut [f32]>,
) {
    const L: usize = 16;
    let d = p.b1.len();
    let full = d - d % L;
    for (i, o) in out.iter_mut().enumerate() {
        let cr = &c[i * np..i * np + d];
        let mut acc = [0.0f32; L];
        let mut tail = 0.0f32;
        match u.as_deref_mut() {
            Some(u) => {
                let ur = &mut u[i * d..(i + 1) * d];
                let lanes = cr[..full].chunks_exact(L).zip(p.b1[..full].chunks_exact(L));
                for ((c, b), (w, uo)) in lanes.zip(
                    p.w2[..full]
                        .chunks_exact(L)
                        .zip(ur[..full].chunks_exact_mut(L)),
                ) {
                    for l in 0..L {
                        let v = c[l] + b[l];
                        uo[l] = v;
                        acc[l] += w[l] * prelu1(v, p.slope);
                    }
                }
                let rest = cr[full..].iter().zip(&p.b1[full..]).zip(&p.w2[full..]);
                for (((c, b), w), uo) in rest.zip(&mut ur[full..]) {
                    let v = c + b;
                    *uo = v;
                    tail += w * prelu1(v, p.slope);
                }
            }
            None => {
                let lanes = cr[..full].chunks_exact(L).zip(p.b1[..full].chunks_exact(L));
                for ((c, b), w) in lanes.zip(p.w2[..full].chunks_exact(L)) {
                    for l in 0..L {
                        acc[l] += w[l] * prelu1(c[l] + b[l], p.slope);
                    }
                }
                let rest = cr[full..].iter().zip(&p.b1[full..]).zip(&p.w2[full..]);
                for ((c, b), w) in rest {
                    tail += w * prelu1(c + b, p.slope);
                }
            }
        }
        *o = p.b2 + acc.iter().sum::<f32>() + tail;
    }
}

/// Forward of the decoder for pairs `(src[i], dst[i])`: writes `u = (h_u ⊙ h_v)·W1ᵀ + b1`
/// (`[B, d]`, for the backward) and returns the `B` logits `b2 + w2 · PReLU(u)`.
pub(crate) fn forward(
    backend: Backend,
    h: &Mat,
    src: &[u32],
    dst: &[u32],
    p: &DecoderParams,
    u: &mut [f32],
) -> Vec<f32> {
    let d = h.cols;
    let w1t = PackedB::of_cols(backend, p.w1, d, d);
    let kp = w1t.kc * 32;
    let np = w1t.cols();
    let mut logits = vec![0.0f32; src.len()];
    u.par_chunks_mut(RB * d)
        .zip(logits.par_chunks_mut(RB))
        .enumerate()
        .with_min_len(4)
        .for_each_init(
            || (vec![0u16; RB * kp], vec![0.0f32; RB * np]),
            |(a, c), (blk, (u, out))| {
                begin(backend);
                let r = blk * RB..blk * RB + out.len();
                hadamard_rows_w(backend, h, &src[r.clone()], &dst[r], a, kp);
                block(backend, a, &w1t, c, np, false);
                logits_rows_w(backend, c, np, p, out, Some(u));
            },
        );
    logits
}

/// Inference-only logits of [`forward`] (no `u` kept): many pairs, e.g. MRR's 1000 negatives
/// per positive.
pub(crate) fn score(
    backend: Backend,
    h: &Mat,
    src: &[u32],
    dst: &[u32],
    p: &DecoderParams,
) -> Vec<f32> {
    let d = h.cols;
    let w1t = PackedB::of_cols(backend, p.w1, d, d);
    let kp = w1t.kc * 32;
    let np = w1t.cols();
    let mut logits = vec![0.0f32; src.len()];
    logits
        .par_chunks_mut(RB)
        .enumerate()
        .with_min_len(16)
        .for_each_init(
            || {
                (
                    vec![0u16; RB * kp],
                    vec![0.0f32; RB * np],
                    vec![0.0f32; RB * d],
                )
            },
            |(a, c, u), (blk, out)| {
                begin(backend);
                let r = blk * RB..blk * RB + out.len();
                hadamard_rows_w(backend, h, &src[r.clone()], &dst[r], a, kp);
                block(backend, a, &w1t, c, np, false);
                let u = (d > 1024).then_some(&mut u[..]);
                logits_rows_w(backend, c, np, p, out, u);
            },
        );
    logits
}

/// Gradients of the decoder from one [`backward`] call (`b2`'s is `Σ d_logits`, left to the
/// caller); `dL/dz` is written into the caller's buffer.
pub(crate) struct DecoderGrads {
    /// `dL/dW1` `[d, d]`.
    pub w1: Vec<f32>,
    pub b1: Vec<f32>,
    pub w2: Vec<f32>,
    pub slope: f32,
}

/// One thread's buffers for a [`backward`] chunk (reused across calls: no page faults).
#[derive(Default)]
struct Scratch {
    /// The width `d` the buffers are shaped for.
    d: usize,
    du_a: Vec<u16>,
    du_t: Vec<u16>,
    z_f: Vec<f32>,
    z_b: Option<PackedB>,
    c: Vec<f32>,
    /// [`train_bce`] only: a block's Hadamard rows `[32, kp]`, the sub-block's `u` `[SB, d]`
    /// and a block's logits (allocated on first use).
    a: Vec<u16>,
    u: Vec<f32>,
    logits: Vec<f32>,
}

impl Scratch {
    /// Shape the buffers for width `d` (fresh, zeroed buffers when the width changes: the
    /// padding columns and rows are never written, so they stay zero).
    fn shape(&mut self, d: usize, fused: bool) {
        let (kp, np, dp) = (round_up(d, 32), round_up(d, 32), round_up(d, RB));
        if self.d != d || self.z_b.is_none() {
            *self = Scratch {
                d,
                du_a: vec![0; SB * kp],
                du_t: vec![0; dp * SB],
                z_f: vec![0.0; SB * np],
                z_b: Some(PackedB::zeros(SB, d)),
                c: vec![0.0; RB * np],
                a: Vec::new(),
                u: Vec::new(),
                logits: Vec::new(),
            };
        }
        if fused && self.u.is_empty() {
            self.a = vec![0; RB * kp];
            self.u = vec![0.0; SB * d];
            self.logits = vec![0.0; RB];
        }
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Rows of the batch per chunk of [`backward`] for `bsz` pairs (a multiple of [`SB`]).
fn chunk_rows(bsz: usize) -> usize {
    round_up(CHUNK.max(bsz.div_ceil(MAX_PARTS)), SB)
}

/// Floats of the partial-gradient buffer [`backward`] takes for `bsz` pairs of width `d`.
pub(crate) fn partials_len(bsz: usize, d: usize) -> usize {
    bsz.div_ceil(chunk_rows(bsz)).max(1) * (round_up(d, RB) * round_up(d, 32) + 3 * d)
}

/// Backward of [`forward`] given `u` and `d_logits = dL/dlogit`: the decoder's gradients, and
/// `dL/dz` into `dz` (`[B, d]`).
///
/// `du = d_logit · w2 ⊙ PReLU'(u)` row by row; `dW1 = duᵀ·z` and `dz = du·W1` as bf16 tile
/// products. The batch is cut into fixed chunks (at least 2048 rows, at most 64 chunks, sizes
/// depending on `B` only) whose partial sums (in `partials`, [`partials_len`] floats, any
/// contents) are added in chunk order: the same bytes whatever the thread count.
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward(
    backend: Backend,
    h: &Mat,
    src: &[u32],
    dst: &[u32],
    u: &[f32],
    d_logits: &[f32],
    p: &DecoderParams,
    dz: &mut [f32],
    partials: &mut [f32],
) -> DecoderGrads {
    let d = h.cols;
    let bsz = src.len();
    assert_eq!(u.len(), bsz * d);
    assert_eq!(dz.len(), bsz * d);
    // dz = du · W1: B[k = out][n = in] = W1[out][in]
    let w1 = PackedB::of_rows(backend, p.w1, d, d);
    let np = w1.cols(); // padded d as N
    let dp = round_up(d, RB); // rows of duᵀ (out)
    let chunk = chunk_rows(bsz);
    let part_len = dp * np + 3 * d;
    let n_parts = bsz.div_ceil(chunk).max(1);
    assert!(partials.len() >= n_parts * part_len);
    let partials = &mut partials[..n_parts * part_len];
    dz.par_chunks_mut(chunk * d)
        .zip(partials.par_chunks_mut(part_len))
        .enumerate()
        .for_each(|(ci, (dz, part))| {
            begin(backend);
            SCRATCH.with(|s| {
                let s = &mut *s.borrow_mut();
                backward_chunk_w(
                    backend,
                    backend,
                    s,
                    h,
                    src,
                    dst,
                    u,
                    d_logits,
                    p,
                    &w1,
                    ci * chunk,
                    dz,
                    part,
                )
            });
        });
    sum_partials(partials, d, dp, np)
}

/// The decoder's gradients from the chunks' partial sums (`[dW1 (dp × np) | dw2 | dslope per
/// column | db1]` each), added in chunk order.
fn sum_partials(partials: &[f32], d: usize, dp: usize, np: usize) -> DecoderGrads {
    let part_len = dp * np + 3 * d;
    let mut out = DecoderGrads {
        w1: vec![0.0f32; d * d],
        b1: vec![0.0f32; d],
        w2: vec![0.0f32; d],
        slope: 0.0,
    };
    for part in partials.chunks(part_len) {
        let (pw1, acc) = part.split_at(dp * np);
        for o in 0..d {
            for (g, v) in out.w1[o * d..(o + 1) * d]
                .iter_mut()
                .zip(&pw1[o * np..o * np + d])
            {
                *g += v;
            }
        }
        for (g, v) in out.w2.iter_mut().zip(&acc[..d]) {
            *g += v;
        }
        out.slope += acc[d..2 * d].iter().sum::<f32>();
        for (g, v) in out.b1.iter_mut().zip(&acc[2 * d..]) {
            *g += v;
        }
    }
    out
}

/// The decoder's forward, BCE-with-logits loss and backward in one pass, for a training step:
/// what [`forward`], [`crate::bce_with_logits`] and [`backward`] give, the same bits, without
/// writing `u` (`[B, d]` f32) to memory and reading it back: each sub-block of 512 pairs is
/// scored (`u` kept in a per-thread buffer), its `d_logits` taken, and its backward done
/// while it is in cache.
///
/// Writes `dz = dL/dz` (`[B, d]`), `d_logits` (`[B]`, `(σ(x) − t) / B`) and the per-pair loss
/// terms (`[B]`, f64; the loss is their sum in order over `B`); `partials` as [`backward`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn train_bce(
    backend: Backend,
    h: &Mat,
    src: &[u32],
    dst: &[u32],
    targets: &[f32],
    p: &DecoderParams,
    dz: &mut [f32],
    d_logits: &mut [f32],
    terms: &mut [f64],
    partials: &mut [f32],
) -> DecoderGrads {
    let d = h.cols;
    let bsz = src.len();
    assert!(dst.len() == bsz && targets.len() == bsz && d_logits.len() == bsz);
    assert!(terms.len() == bsz && dz.len() == bsz * d);
    let w1 = PackedB::of_rows(backend, p.w1, d, d);
    let w1t = PackedB::of_cols(backend, p.w1, d, d);
    let np = w1.cols();
    let dp = round_up(d, RB);
    let chunk = chunk_rows(bsz);
    let part_len = dp * np + 3 * d;
    let n_parts = bsz.div_ceil(chunk).max(1);
    assert!(partials.len() >= n_parts * part_len);
    let partials = &mut partials[..n_parts * part_len];
    let inv = 1.0 / bsz.max(1) as f64;
    dz.par_chunks_mut(chunk * d)
        .zip(partials.par_chunks_mut(part_len))
        .zip(d_logits.par_chunks_mut(chunk))
        .zip(terms.par_chunks_mut(chunk))
        .enumerate()
        .for_each(|(ci, (((dz, part), dl), tm))| {
            begin(backend);
            let r = ci * chunk..ci * chunk + dl.len();
            SCRATCH.with(|s| {
                let s = &mut *s.borrow_mut();
                bce_chunk_w(
                    backend,
                    backend,
                    s,
                    h,
                    &src[r.clone()],
                    &dst[r.clone()],
                    &targets[r],
                    inv,
                    p,
                    &w1t,
                    &w1,
                    dz,
                    dl,
                    tm,
                    part,
                )
            });
        });
    sum_partials(partials, d, dp, np)
}

wide_fn!(bce_chunk_w = bce_chunk(
    tiles: Backend, s: &mut Scratch, h: &Mat, src: &[u32], dst: &[u32], targets: &[f32], inv: f64,
    p: &DecoderParams, w1t: &PackedB, w1: &PackedB, dz: &mut [f32], d_logits: &mut [f32],
    terms: &mut [f64], part: &mut [f32]
));

/// One chunk of [`train_bce`] (its own pairs, targets and outputs); `part` as in
/// [`backward_chunk`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn bce_chunk(
    backend: Backend,
    s: &mut Scratch,
    h: &Mat,
    src: &[u32],
    dst: &[u32],
    targets: &[f32],
    inv: f64,
    p: &DecoderParams,
    w1t: &PackedB,
    w1: &PackedB,
    dz: &mut [f32],
    d_logits: &mut [f32],
    terms: &mut [f64],
    part: &mut [f32],
) {
    let d = h.cols;
    let (kp, np) = (w1.kc * 32, w1.cols());
    let dp = round_up(d, RB);
    let n_rows = dz.len() / d;
    part.fill(0.0);
    let (pw1, acc) = part.split_at_mut(dp * np);
    s.shape(d, true);
    for s0 in (0..n_rows).step_by(SB) {
        let ns = SB.min(n_rows - s0);
        // forward and loss of the sub-block, 32 pairs at a time
        for r0 in (0..ns).step_by(RB) {
            let r = s0 + r0..s0 + (r0 + RB).min(ns);
            let nr = r.len();
            hadamard_rows_w(backend, h, &src[r.clone()], &dst[r.clone()], &mut s.a, kp);
            block(backend, &s.a, w1t, &mut s.c, np, false);
            let u = &mut s.u[r0 * d..(r0 + nr) * d];
            logits_rows_w(backend, &s.c, np, p, &mut s.logits[..nr], Some(u));
            for (i, &x) in s.logits[..nr].iter().enumerate() {
                let (l, g) = crate::loss::bce_term(x, targets[r.start + i], inv);
                terms[r.start + i] = l;
                d_logits[r.start + i] = g;
            }
        }
        // its backward, as backward_chunk's
        let u = std::mem::take(&mut s.u);
        let b = SubBlock {
            h,
            src,
            dst,
            u: &u,
            u_row0: 0,
            d_logits,
            p,
            first: s0,
            ns,
        };
        sub_block_rows(backend, s, &b, acc);
        s.u = u;
        backward_products(backend, s, w1, pw1, dp, np, kp, s0, ns, d, dz);
    }
}

/// One chunk of [`backward`]: rows `row0..row0 + dz.len() / d`; `part` = `[dW1 (dp × np) |
/// dw2 | dslope per column | db1]`, overwritten.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn backward_chunk(
    backend: Backend,
    s: &mut Scratch,
    h: &Mat,
    src: &[u32],
    dst: &[u32],
    u: &[f32],
    d_logits: &[f32],
    p: &DecoderParams,
    w1: &PackedB,
    row0: usize,
    dz: &mut [f32],
    part: &mut [f32],
) {
    let d = h.cols;
    let (kp, np) = (w1.kc * 32, w1.cols());
    let dp = round_up(d, RB);
    let n_rows = dz.len() / d;
    part.fill(0.0);
    let (pw1, acc) = part.split_at_mut(dp * np);
    s.shape(d, false);
    for s0 in (0..n_rows).step_by(SB) {
        let ns = SB.min(n_rows - s0);
        let first = row0 + s0;
        let b = SubBlock {
            h,
            src,
            dst,
            u,
            u_row0: first,
            d_logits,
            p,
            first,
            ns,
        };
        sub_block_rows(backend, s, &b, acc);
        backward_products(backend, s, w1, pw1, dp, np, kp, s0, ns, d, dz);
    }
}

/// What the row work of a backward sub-block reads: pairs `first..first + ns` (their `src`,
/// `dst` and `d_logits`) and their pre-activations, rows `u_row0..u_row0 + ns` of `u`.
struct SubBlock<'a> {
    h: &'a Mat,
    src: &'a [u32],
    dst: &'a [u32],
    u: &'a [f32],
    u_row0: usize,
    d_logits: &'a [f32],
    p: &'a DecoderParams<'a>,
    first: usize,
    ns: usize,
}

/// The row work of a backward sub-block into `s` and `acc` (`[dw2 | dslope per column | db1]`):
/// the AVX-512 code on AMX machines when `d % 16 == 0`, else the portable code (same bits).
fn sub_block_rows(backend: Backend, s: &mut Scratch, b: &SubBlock, acc: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if backend.wide() && b.h.cols.is_multiple_of(16) {
        // SAFETY: the backend's detection checked AVX-512F/BW/VL; d % 16 == 0.
        return unsafe { x86::backward_rows(s, b, acc) };
    }
    let _ = backend;
    backward_rows(s, b, acc)
}

/// The portable row work of one sub-block of [`backward_chunk`] (see `x86::backward_rows`).
#[inline(always)]
fn backward_rows(s: &mut Scratch, b: &SubBlock, acc: &mut [f32]) {
    let SubBlock {
        h,
        src,
        dst,
        u,
        u_row0,
        d_logits,
        p,
        first,
        ns,
    } = *b;
    let d = h.cols;
    let (aw2, rest) = acc.split_at_mut(d);
    let (asl, ab1) = rest.split_at_mut(d);
    let kp = s.du_a.len() / SB;
    let np = s.z_f.len() / SB;
    let z_b = s.z_b.as_mut().expect("backward_rows: z_b");
    {
        for i in 0..SB {
            let (da, zf) = (
                &mut s.du_a[i * kp..i * kp + d],
                &mut s.z_f[i * np..i * np + d],
            );
            if i >= ns {
                da.fill(0);
                zf.fill(0.0);
                continue;
            }
            let g = first + i;
            let dl = d_logits[g];
            let ur = &u[(u_row0 + i) * d..(u_row0 + i + 1) * d];
            let cols = ur.iter().zip(p.w2).zip(aw2.iter_mut()).zip(asl.iter_mut());
            for ((((&uv, &w2), aw2), asl), (ab1, da)) in cols.zip(ab1.iter_mut().zip(da.iter_mut()))
            {
                *aw2 += dl * prelu1(uv, p.slope);
                let gw = dl * w2;
                *asl += gw * uv.min(0.0);
                let v = gw * prelu_grad1(uv, p.slope);
                *ab1 += v;
                *da = to_bf16(v);
            }
            let (x, y) = (h.row(src[g] as usize), h.row(dst[g] as usize));
            for ((z, x), y) in zf.iter_mut().zip(x).zip(y) {
                *z = x * y;
            }
        }
        // duᵀ: [dp, SB] from du: [SB, kp], in 32 × 32 blocks
        for i0 in (0..SB).step_by(32) {
            for j0 in (0..d).step_by(32) {
                for j in j0..(j0 + 32).min(d) {
                    let row = &mut s.du_t[j * SB + i0..j * SB + i0 + 32];
                    for (ii, o) in row.iter_mut().enumerate() {
                        *o = s.du_a[(i0 + ii) * kp + j];
                    }
                }
            }
        }
        // z as the B operand: row pairs (2r, 2r+1) interleaved per column
        for k in (0..SB).step_by(2) {
            let (r0, r1) = (
                &s.z_f[k * np..(k + 1) * np],
                &s.z_f[(k + 1) * np..(k + 2) * np],
            );
            let (q, r) = (k / 32, (k % 32) / 2);
            for t in 0..z_b.nt {
                let base = ((t * z_b.kc + q) * 16 + r) * 32;
                let dst = &mut z_b.data[base..base + 32];
                let (a, b) = (&r0[16 * t..16 * t + 16], &r1[16 * t..16 * t + 16]);
                for c in 0..16 {
                    dst[2 * c] = to_bf16(a[c]);
                    dst[2 * c + 1] = to_bf16(b[c]);
                }
            }
        }
    }
}

/// The tile products of one sub-block of [`backward_chunk`]: `dW1 (+)= duᵀ · z` into `pw1` and
/// `dz = du · W1` into its rows `s0..s0 + ns`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn backward_products(
    backend: Backend,
    s: &mut Scratch,
    w1: &PackedB,
    pw1: &mut [f32],
    dp: usize,
    np: usize,
    kp: usize,
    s0: usize,
    ns: usize,
    d: usize,
    dz: &mut [f32],
) {
    let z_b = s.z_b.as_ref().expect("backward_products: z_b");
    {
        // dW1 (+)= duᵀ · z, 32 output rows at a time
        for g in 0..dp / RB {
            block(
                backend,
                &s.du_t[g * RB * SB..(g + 1) * RB * SB],
                z_b,
                &mut pw1[g * RB * np..(g + 1) * RB * np],
                np,
                true,
            );
        }
        // dz = du · W1, 32 rows at a time
        for r0 in (0..ns).step_by(RB) {
            let du = &s.du_a[r0 * kp..(r0 + RB) * kp];
            if np == d && r0 + RB <= ns {
                // full rows of an unpadded width: straight into dz
                let rows = (s0 + r0) * d..(s0 + r0 + RB) * d;
                block(backend, du, w1, &mut dz[rows], d, false);
                continue;
            }
            block(backend, du, w1, &mut s.c, np, false);
            for i in 0..RB.min(ns - r0) {
                let row = s0 + r0 + i;
                dz[row * d..(row + 1) * d].copy_from_slice(&s.c[i * np..i * np + d]);
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// General products (the encoder's dense layers) under a precision scope.

thread_local! {
    /// The tile backend the products of `mat.rs` use on this thread (`None`: f32 `gemm`).
    static SCOPE: std::cell::Cell<Option<Backend>> = const { std::cell::Cell::new(None) };
}

/// While alive, the dense products of `mat.rs` called on this thread ([`crate::mat`]'s
/// `matmul_a_bt`, `matmul_a_b`, `matmul_at_b`: the encoder's linear layers) run as bf16 tile
/// products on `backend` (`None`: f32). [`crate::Model`] enters one in its passes at
/// [`MatmulPrecision::Medium`]; the previous setting comes back on drop.
pub(crate) struct PrecisionScope(Option<Backend>);

impl PrecisionScope {
    pub(crate) fn enter(backend: Option<Backend>) -> PrecisionScope {
        PrecisionScope(SCOPE.with(|s| s.replace(backend)))
    }
}

impl Drop for PrecisionScope {
    fn drop(&mut self) {
        SCOPE.with(|s| s.set(self.0));
    }
}

/// The backend of the innermost [`PrecisionScope`] on this thread.
pub(crate) fn scoped() -> Option<Backend> {
    SCOPE.with(|s| s.get())
}

/// Rows `i0..i0 + 32` of `a` (`[m, k]` row-major) rounded into `dst` (`[32, kp]`); rows past `m`
/// are zeroed (the padding columns are never written: zero).
#[inline(always)]
fn round_rows(a: &[f32], m: usize, k: usize, i0: usize, dst: &mut [u16], kp: usize) {
    for i in 0..RB {
        let row = &mut dst[i * kp..i * kp + k];
        if i0 + i < m {
            for (o, &v) in row.iter_mut().zip(&a[(i0 + i) * k..(i0 + i + 1) * k]) {
                *o = to_bf16(v);
            }
        } else {
            row.fill(0);
        }
    }
}

/// `c` rows (`[rows, n]`) (+)= the first `n` columns of `tmp` (`[32, np]`).
#[inline(always)]
fn store_rows(tmp: &[f32], np: usize, c: &mut [f32], n: usize, acc: bool) {
    for (i, row) in c.chunks_mut(n).enumerate() {
        let t = &tmp[i * np..i * np + n];
        if acc {
            for (c, t) in row.iter_mut().zip(t) {
                *c += t;
            }
        } else {
            row.copy_from_slice(t);
        }
    }
}

wide_fn!(round_rows_w = round_rows(a: &[f32], m: usize, k: usize, i0: usize, dst: &mut [u16], kp: usize));
wide_fn!(store_rows_w = store_rows(tmp: &[f32], np: usize, c: &mut [f32], n: usize, acc: bool));

/// `c[m, n] (+)= a[m, k] · B` with `B` packed (`k × n`), parallel over 32-row blocks.
#[allow(clippy::too_many_arguments)]
fn gemm_rows(
    backend: Backend,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &PackedB,
    c: &mut [f32],
    acc: bool,
) {
    let (kp, np) = (b.kc * 32, b.cols());
    c[..m * n]
        .par_chunks_mut(RB * n)
        .enumerate()
        .with_min_len((4096 / (n + k).max(1)).max(1))
        .for_each_init(
            || (vec![0u16; RB * kp], vec![0.0f32; RB * np]),
            |(ab, tmp), (blk, c)| {
                begin(backend);
                round_rows_w(backend, a, m, k, blk * RB, ab, kp);
                block(backend, ab, b, tmp, np, false);
                store_rows_w(backend, tmp, np, c, n, acc);
            },
        );
}

/// `c[m,n] (+)= a[m,k] · b[n,k]ᵀ` in bf16 tiles (`matmul_a_bt` under [`PrecisionScope`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_a_bt(
    backend: Backend,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
    assert!(
        a.len() >= m * k && b.len() >= n * k && c.len() >= m * n,
        "gemm_a_bt extents"
    );
    let bp = PackedB::of_cols(backend, b, k, n);
    gemm_rows(backend, m, n, k, a, &bp, c, acc);
}

/// `c[m,n] (+)= a[m,k] · b[k,n]` in bf16 tiles (`matmul_a_b` under [`PrecisionScope`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_a_b(
    backend: Backend,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "gemm_a_b extents"
    );
    let bp = PackedB::of_rows(backend, b, k, n);
    gemm_rows(backend, m, n, k, a, &bp, c, acc);
}

/// Rows of the batch dimension per partial product of [`gemm_at_b`] (at least).
const AT_CHUNK: usize = 4096;
/// Most partial products of [`gemm_at_b`] (bounds their memory: `32 · m · n` floats).
const AT_MAX_PARTS: usize = 32;

/// One thread's buffers for a [`gemm_at_b`] part.
#[derive(Default)]
struct AtScratch {
    /// `(mp, n)` the buffers are shaped for.
    shape: (usize, usize),
    at: Vec<u16>,
    bz: Option<PackedB>,
    rows: Vec<f32>,
}

thread_local! {
    static AT_SCRATCH: std::cell::RefCell<AtScratch> = std::cell::RefCell::new(AtScratch::default());
    /// The calling thread's partial products of [`gemm_at_b`] (reused: no page faults).
    static AT_PARTS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// One part of [`gemm_at_b`]: `part[mp, np] = a[r, m]ᵀ · b[r, n]` over its rows `r`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn at_b_part(
    backend: Backend,
    s: &mut AtScratch,
    m: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    part: &mut [f32],
) {
    let (mp, np) = (round_up(m, RB), round_up(n, 32));
    if s.shape != (mp, n) || s.bz.is_none() {
        *s = AtScratch {
            shape: (mp, n),
            at: vec![0; mp * SB],
            bz: Some(PackedB::zeros(SB, n)),
            rows: vec![0.0; 2 * np],
        };
    }
    part.fill(0.0);
    let rows = a.len() / m;
    for s0 in (0..rows).step_by(SB) {
        let ns = SB.min(rows - s0);
        #[cfg(target_arch = "x86_64")]
        if backend.wide() {
            let bz = s.bz.as_mut().expect("set above");
            // SAFETY: the backend's detection checked AVX-512F/BW/VL.
            unsafe { x86::at_b_pack(&mut s.at, bz, m, n, a, b, s0, ns) };
        } else {
            at_b_pack(s, m, n, a, b, s0, ns);
        }
        #[cfg(not(target_arch = "x86_64"))]
        at_b_pack(s, m, n, a, b, s0, ns);
        let bz = s.bz.as_ref().expect("set above");
        for g in 0..mp / RB {
            let at = &s.at[g * RB * SB..(g + 1) * RB * SB];
            block(
                backend,
                at,
                bz,
                &mut part[g * RB * np..(g + 1) * RB * np],
                np,
                true,
            );
        }
    }
}

/// The operands of one sub-block of [`at_b_part`] (rows `s0..s0 + ns` of `a` `[rows, m]` and
/// `b` `[rows, n]`): `aᵀ` rounded into `s.at` (`[mp, SB]`) and `b`'s rows packed into `s.bz`;
/// zero past `ns`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn at_b_pack(s: &mut AtScratch, m: usize, n: usize, a: &[f32], b: &[f32], s0: usize, ns: usize) {
    let np = s.rows.len() / 2;
    let bz = s.bz.as_mut().expect("at_b_pack: bz");
    {
        // aᵀ of the sub-block: [mp, SB], zero past ns
        for i0 in (0..SB).step_by(32) {
            for o0 in (0..m).step_by(32) {
                for o in o0..(o0 + 32).min(m) {
                    let dst = &mut s.at[o * SB + i0..o * SB + i0 + 32];
                    for (ii, d) in dst.iter_mut().enumerate() {
                        let i = s0 + i0 + ii;
                        *d = if i0 + ii < ns {
                            to_bf16(a[i * m + o])
                        } else {
                            0
                        };
                    }
                }
            }
        }
        // b's rows as the B operand, in pairs
        for kk in (0..SB).step_by(2) {
            let (q, r) = (kk / 32, (kk % 32) / 2);
            let (lo, hi) = s.rows.split_at_mut(np);
            for (e, buf) in [(0, lo), (1, hi)] {
                if kk + e < ns {
                    buf[..n].copy_from_slice(&b[(s0 + kk + e) * n..(s0 + kk + e + 1) * n]);
                } else {
                    buf[..n].fill(0.0);
                }
            }
            let (r0, r1) = s.rows.split_at(np);
            for t in 0..bz.nt {
                let base = ((t * bz.kc + q) * 16 + r) * 32;
                let dst = &mut bz.data[base..base + 32];
                let (x, y) = (&r0[16 * t..16 * t + 16], &r1[16 * t..16 * t + 16]);
                for c in 0..16 {
                    dst[2 * c] = to_bf16(x[c]);
                    dst[2 * c + 1] = to_bf16(y[c]);
                }
            }
        }
    }
}

wide_fn!(at_b_part_w = at_b_part(
    tiles: Backend, s: &mut AtScratch, m: usize, n: usize, a: &[f32], b: &[f32], part: &mut [f32]
));

/// `c[m,n] (+)= a[k,m]ᵀ · b[k,n]` in bf16 tiles (`matmul_at_b` under [`PrecisionScope`]; `k` is
/// the batch dimension). Cut along `k` into fixed parts (at least 4096 rows, at most 32 parts:
/// sizes depend on `k` only) computed in parallel and summed in part order, so the result does
/// not depend on the number of threads.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_at_b(
    backend: Backend,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
    assert!(
        a.len() >= k * m && b.len() >= k * n && c.len() >= m * n,
        "gemm_at_b extents"
    );
    if !acc {
        c[..m * n].fill(0.0);
    }
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let chunk = round_up(AT_CHUNK.max(k.div_ceil(AT_MAX_PARTS)), SB);
    let n_parts = k.div_ceil(chunk);
    let (mp, np) = (round_up(m, RB), round_up(n, 32));
    AT_PARTS.with(|parts| {
        let mut parts = parts.borrow_mut();
        if parts.len() < n_parts * mp * np {
            parts.resize(n_parts * mp * np, 0.0);
        }
        let parts = &mut parts[..n_parts * mp * np];
        parts
            .par_chunks_mut(mp * np)
            .enumerate()
            .for_each(|(ci, part)| {
                begin(backend);
                let (r0, r1) = (ci * chunk, ((ci + 1) * chunk).min(k));
                AT_SCRATCH.with(|s| {
                    let s = &mut *s.borrow_mut();
                    at_b_part_w(
                        backend,
                        backend,
                        s,
                        m,
                        n,
                        &a[r0 * m..r1 * m],
                        &b[r0 * n..r1 * n],
                        part,
                    );
                });
            });
        for part in parts.chunks(mp * np) {
            for i in 0..m {
                for (c, p) in c[i * n..(i + 1) * n]
                    .iter_mut()
                    .zip(&part[i * np..i * np + n])
                {
                    *c += p;
                }
            }
        }
    });
}

/// Explicit AVX-512 versions of the row code around the tile products (the compiler left
/// `logits_rows`' PReLU scalar, and the bf16 transposes are strided). Each does the same float
/// operations in the same order per element as its portable twin, so both give the same bits
/// (the tests compare them).
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{DecoderParams, Scratch, SubBlock, RB, SB};
    use crate::Mat;
    use std::arch::x86_64::*;

    /// f32 lanes rounded to bf16 (nearest even, as [`super::to_bf16`]); the bf16 bits are each
    /// lane's upper 16 bits.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn round(v: __m512) -> __m512i {
        let b = _mm512_castps_si512(v);
        let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(b), _mm512_set1_epi32(1));
        _mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)))
    }

    /// 16 f32 rounded to bf16, stored at `dst` (16 `u16`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn store_bf16(dst: *mut u16, v: __m512) {
        let r = _mm512_srli_epi32::<16>(round(v));
        _mm256_storeu_si256(dst as *mut __m256i, _mm512_cvtepi32_epi16(r));
    }

    /// 16 words `(bf16(a[c]), bf16(b[c]))` (`a` in the low half): a VNNI row pair.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn pair(a: __m512, b: __m512) -> __m512i {
        let lo = _mm512_srli_epi32::<16>(round(a));
        let hi = _mm512_and_si512(round(b), _mm512_set1_epi32(0xffff_0000u32 as i32));
        _mm512_or_si512(lo, hi)
    }

    /// [`super::block`] on AVX512_BF16: `C[32, N] (+)= A[32, K] · B` with `vdpbf16ps`. In a
    /// column tile of the packed `B` the 16 columns of K-pair `p` are one 64-byte row at
    /// `p · 32` (`[kc][16][16][2]` is `[K / 2][16][2]`), which is the operand `vdpbf16ps`
    /// takes: each f32 lane adds `a[2p] · b[2p][c] + a[2p+1] · b[2p+1][c]` (products exact in
    /// f32), with row `i`'s pair `(a[2p], a[2p+1])` broadcast as one 32-bit word. Rows go in
    /// groups of 8 against two column tiles: 16 accumulators in registers over all of `K`.
    ///
    /// # Safety
    /// AVX512_BF16 and AVX-512F; `a` holds 32 rows of `kp = b.kc · 32` bf16 and `c` 32 rows of
    /// stride `ldc >= b.cols()` (checked by the caller).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
    pub(super) unsafe fn block_dpbf16(
        a: *const u16,
        kp: usize,
        b: &super::PackedB,
        c: *mut f32,
        ldc: usize,
        acc: bool,
    ) {
        const G: usize = 8;
        let pairs = kp / 2;
        for n2 in 0..b.nt / 2 {
            let b0 = b.data.as_ptr().add(2 * n2 * b.kc * 512);
            let b1 = b.data.as_ptr().add((2 * n2 + 1) * b.kc * 512);
            let c0 = c.add(n2 * 32);
            for g in 0..RB / G {
                let mut s = [[_mm512_setzero_ps(); 2]; G];
                if acc {
                    for (i, si) in s.iter_mut().enumerate() {
                        let row = c0.add((g * G + i) * ldc);
                        si[0] = _mm512_loadu_ps(row);
                        si[1] = _mm512_loadu_ps(row.add(16));
                    }
                }
                let a0 = a.add(g * G * kp) as *const u8;
                for p in 0..pairs {
                    let v0: __m512bh =
                        std::mem::transmute(_mm512_loadu_si512(b0.add(p * 32) as *const _));
                    let v1: __m512bh =
                        std::mem::transmute(_mm512_loadu_si512(b1.add(p * 32) as *const _));
                    for (i, si) in s.iter_mut().enumerate() {
                        let w = (a0.add(i * kp * 2 + p * 4) as *const i32).read_unaligned();
                        let ai: __m512bh = std::mem::transmute(_mm512_set1_epi32(w));
                        si[0] = _mm512_dpbf16_ps(si[0], ai, v0);
                        si[1] = _mm512_dpbf16_ps(si[1], ai, v1);
                    }
                }
                for (i, si) in s.iter().enumerate() {
                    let row = c0.add((g * G + i) * ldc);
                    _mm512_storeu_ps(row, si[0]);
                    _mm512_storeu_ps(row.add(16), si[1]);
                }
            }
        }
    }

    /// `max(v, 0) + slope · min(v, 0)` ([`crate::kernels::prelu1`]).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn prelu(v: __m512, slope: __m512) -> __m512 {
        let z = _mm512_setzero_ps();
        _mm512_add_ps(
            _mm512_max_ps(v, z),
            _mm512_mul_ps(slope, _mm512_min_ps(v, z)),
        )
    }

    /// Transpose of a 16 × 16 matrix of 32-bit words held as 16 rows: swap the off-diagonal
    /// blocks of 8, then of 4, 2 and 1 within the blocks (four rounds of two-source permutes).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn transpose16(r: &mut [__m512i; 16]) {
        for b in [8usize, 4, 2, 1] {
            let lo: [i32; 16] =
                std::array::from_fn(|c| if c & b == 0 { c } else { 16 + c - b } as i32);
            let hi: [i32; 16] =
                std::array::from_fn(|c| if c & b == 0 { c + b } else { 16 + c } as i32);
            // SAFETY: 16 i32 = 64 bytes read from arrays of that size
            let (lo, hi) = unsafe {
                (
                    _mm512_loadu_si512(lo.as_ptr() as *const __m512i),
                    _mm512_loadu_si512(hi.as_ptr() as *const __m512i),
                )
            };
            for i in 0..16 {
                if i & b == 0 {
                    let (x, y) = (r[i], r[i + b]);
                    r[i] = _mm512_permutex2var_epi32(x, lo, y);
                    r[i + b] = _mm512_permutex2var_epi32(x, hi, y);
                }
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn hadamard_rows(
        h: &Mat,
        src: &[u32],
        dst: &[u32],
        a: &mut [u16],
        kp: usize,
    ) {
        let d = h.cols;
        let full = d - d % 16;
        for i in 0..RB {
            let row = &mut a[i * kp..i * kp + d];
            if i < src.len() {
                let (x, y) = (h.row(src[i] as usize), h.row(dst[i] as usize));
                for c in (0..full).step_by(16) {
                    let z = _mm512_mul_ps(
                        _mm512_loadu_ps(x.as_ptr().add(c)),
                        _mm512_loadu_ps(y.as_ptr().add(c)),
                    );
                    store_bf16(row.as_mut_ptr().add(c), z);
                }
                for c in full..d {
                    row[c] = super::to_bf16(x[c] * y[c]);
                }
            } else {
                row.fill(0);
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn logits_rows(
        c: &[f32],
        np: usize,
        p: &DecoderParams,
        out: &mut [f32],
        mut u: Option<&mut [f32]>,
    ) {
        let d = p.b1.len();
        let full = d - d % 16;
        let slope = _mm512_set1_ps(p.slope);
        assert!(c.len() >= out.len().saturating_sub(1) * np + d && p.w2.len() >= d);
        for (i, o) in out.iter_mut().enumerate() {
            let cr = &c[i * np..i * np + d];
            let mut ur = u.as_deref_mut().map(|u| &mut u[i * d..(i + 1) * d]);
            let mut acc = _mm512_setzero_ps();
            for k in (0..full).step_by(16) {
                let v = _mm512_add_ps(
                    _mm512_loadu_ps(cr.as_ptr().add(k)),
                    _mm512_loadu_ps(p.b1.as_ptr().add(k)),
                );
                if let Some(ur) = ur.as_deref_mut() {
                    _mm512_storeu_ps(ur.as_mut_ptr().add(k), v);
                }
                let w = _mm512_loadu_ps(p.w2.as_ptr().add(k));
                acc = _mm512_add_ps(acc, _mm512_mul_ps(w, prelu(v, slope)));
            }
            let mut lanes = [0.0f32; 16];
            _mm512_storeu_ps(lanes.as_mut_ptr(), acc);
            let mut tail = 0.0f32;
            for k in full..d {
                let v = cr[k] + p.b1[k];
                if let Some(ur) = ur.as_deref_mut() {
                    ur[k] = v;
                }
                tail += p.w2[k] * crate::kernels::prelu1(v, p.slope);
            }
            *o = p.b2 + lanes.iter().sum::<f32>() + tail;
        }
    }

    /// `count` (≤ 16) floats from `p`, zero past them.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn load_n(p: *const f32, count: usize) -> __m512 {
        if count >= 16 {
            _mm512_loadu_ps(p)
        } else {
            _mm512_maskz_loadu_ps(((1u32 << count) - 1) as __mmask16, p)
        }
    }

    /// [`super::PackedB::of_rows`] into a zeroed `b`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn pack_rows(
        b: &mut super::PackedB,
        src: &[f32],
        k_rows: usize,
        n_cols: usize,
    ) {
        let row = |k: usize, c0: usize| {
            if k < k_rows {
                load_n(src.as_ptr().add(k * n_cols + c0), n_cols - c0)
            } else {
                _mm512_setzero_ps()
            }
        };
        for kk in (0..k_rows).step_by(2) {
            let (q, r) = (kk / 32, (kk % 32) / 2);
            for t in 0..n_cols.div_ceil(16) {
                let base = ((t * b.kc + q) * 16 + r) * 32;
                let w = pair(row(kk, 16 * t), row(kk + 1, 16 * t));
                _mm512_storeu_si512(b.data.as_mut_ptr().add(base) as *mut __m512i, w);
            }
        }
    }

    /// [`super::PackedB::of_cols`] into a zeroed `b`: per tile, 16 columns' 32-deep slices
    /// rounded into words, then a 16 × 16 word transpose.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn pack_cols(
        b: &mut super::PackedB,
        src: &[f32],
        k_rows: usize,
        n_cols: usize,
    ) {
        let half = |n: usize, k: usize| {
            if k < k_rows {
                let v = load_n(src.as_ptr().add(n * k_rows + k), k_rows - k);
                _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(round(v)))
            } else {
                _mm256_setzero_si256()
            }
        };
        for t in 0..n_cols.div_ceil(16) {
            for q in 0..k_rows.div_ceil(32) {
                let k0 = 32 * q;
                let mut w: [__m512i; 16] = std::array::from_fn(|c| {
                    let n = 16 * t + c;
                    if n < n_cols {
                        _mm512_inserti64x4::<1>(
                            _mm512_castsi256_si512(half(n, k0)),
                            half(n, k0 + 16),
                        )
                    } else {
                        _mm512_setzero_si512()
                    }
                });
                transpose16(&mut w);
                for (r, v) in w.iter().enumerate() {
                    let base = ((t * b.kc + q) * 16 + r) * 32;
                    _mm512_storeu_si512(b.data.as_mut_ptr().add(base) as *mut __m512i, *v);
                }
            }
        }
    }

    /// [`super::at_b_pack`]: `aᵀ` in 16 × 16 word transposes of row pairs, `b`'s row pairs as
    /// VNNI words; the same bits.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn at_b_pack(
        at: &mut [u16],
        bz: &mut super::PackedB,
        m: usize,
        n: usize,
        a: &[f32],
        b: &[f32],
        s0: usize,
        ns: usize,
    ) {
        use super::to_bf16;
        assert!(a.len() >= (s0 + ns) * m && b.len() >= (s0 + ns) * n);
        assert!(at.len() >= m * SB && bz.data.len() >= bz.nt * bz.kc * 512);
        let zero = _mm512_setzero_ps();
        let row = |x: &[f32], w: usize, i: usize, c: usize| {
            if i < ns {
                _mm512_loadu_ps(x.as_ptr().add((s0 + i) * w + c))
            } else {
                zero
            }
        };
        // aᵀ: row o holds the SB rounded a[i][o] as SB / 2 words
        let mfull = m - m % 16;
        let at_w = at.as_mut_ptr() as *mut i32;
        for mb in (0..SB / 2).step_by(16) {
            for o0 in (0..mfull).step_by(16) {
                let mut w: [__m512i; 16] = std::array::from_fn(|j| {
                    pair(row(a, m, 2 * (mb + j), o0), row(a, m, 2 * (mb + j) + 1, o0))
                });
                transpose16(&mut w);
                for (c, r) in w.iter().enumerate() {
                    _mm512_storeu_si512(at_w.add((o0 + c) * SB / 2 + mb) as *mut __m512i, *r);
                }
            }
            for o in mfull..m {
                for ii in 0..32 {
                    let i = 2 * mb + ii;
                    at[o * SB + i] = if i < ns {
                        to_bf16(a[(s0 + i) * m + o])
                    } else {
                        0
                    };
                }
            }
        }
        // b's rows in pairs, 16 columns per tile row
        let nfull = n - n % 16;
        for kk in (0..SB).step_by(2) {
            let (q, r) = (kk / 32, (kk % 32) / 2);
            for t in 0..bz.nt {
                let base = ((t * bz.kc + q) * 16 + r) * 32;
                let c0 = 16 * t;
                if c0 < nfull {
                    let wv = pair(row(b, n, kk, c0), row(b, n, kk + 1, c0));
                    _mm512_storeu_si512(bz.data.as_mut_ptr().add(base) as *mut __m512i, wv);
                } else {
                    for c in 0..16 {
                        let v = |i: usize| {
                            if i < ns && c0 + c < n {
                                b[(s0 + i) * n + c0 + c]
                            } else {
                                0.0
                            }
                        };
                        bz.data[base + 2 * c] = to_bf16(v(kk));
                        bz.data[base + 2 * c + 1] = to_bf16(v(kk + 1));
                    }
                }
            }
        }
    }

    /// The row work of one sub-block of [`super::backward_chunk`] (rows `first..first + ns`
    /// of the batch; `d % 16 == 0`): `du` rounded into `s.du_a` (row-major) and `s.du_t`
    /// (transposed), `z = h_u ⊙ h_v` packed into `s.z_b`, and the `w2`, slope and `b1` gradient
    /// sums. Rows are taken in pairs (one VNNI word per column; a missing second row is zero),
    /// columns in groups of up to 64 whose sums stay in registers over the rows.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn backward_rows(s: &mut Scratch, b: &SubBlock, acc: &mut [f32]) {
        let d = b.h.cols;
        assert!(d.is_multiple_of(16) && acc.len() >= 3 * d && b.p.w2.len() >= d);
        assert!(b.u.len() >= (b.u_row0 + b.ns) * d && b.d_logits.len() >= b.first + b.ns);
        assert!(b.src.len() >= b.first + b.ns && b.dst.len() >= b.first + b.ns);
        let mut k0 = 0;
        while k0 < d {
            let g = if d - k0 >= 64 {
                4
            } else if d - k0 >= 32 {
                2
            } else {
                1
            };
            match g {
                1 => backward_cols::<1>(s, b, k0, acc),
                2 => backward_cols::<2>(s, b, k0, acc),
                _ => backward_cols::<4>(s, b, k0, acc),
            }
            k0 += 16 * g;
        }
    }

    /// [`backward_rows`] for the `16·G` columns from `k0`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn backward_cols<const G: usize>(
        s: &mut Scratch,
        b: &SubBlock,
        k0: usize,
        acc: &mut [f32],
    ) {
        let SubBlock {
            h,
            src,
            dst,
            u,
            u_row0,
            d_logits,
            p,
            first,
            ns,
        } = *b;
        let d = h.cols;
        let (aw2, rest) = acc.split_at_mut(d);
        let (asl, ab1) = rest.split_at_mut(d);
        let kp = s.du_a.len() / SB;
        let z_b = s.z_b.as_mut().expect("backward_rows: z_b");
        let kc = z_b.kc;
        let slope = _mm512_set1_ps(p.slope);
        let one_minus = _mm512_set1_ps(1.0 - p.slope);
        let zero = _mm512_setzero_ps();
        let one = _mm512_set1_ps(1.0);
        // du_t as u32 words: word (o, m) = (du[2m][o], du[2m+1][o])
        let du_t = s.du_t.as_mut_ptr() as *mut i32;
        let mut a_w2 = [zero; G];
        let mut a_sl = [zero; G];
        let mut a_b1 = [zero; G];
        for j in 0..G {
            a_w2[j] = _mm512_loadu_ps(aw2.as_ptr().add(k0 + 16 * j));
            a_sl[j] = _mm512_loadu_ps(asl.as_ptr().add(k0 + 16 * j));
            a_b1[j] = _mm512_loadu_ps(ab1.as_ptr().add(k0 + 16 * j));
        }
        let w2: [__m512; G] =
            std::array::from_fn(|j| _mm512_loadu_ps(p.w2.as_ptr().add(k0 + 16 * j)));
        // duᵀ words of 16 pairs per column chunk, transposed and stored 16 pairs at a time
        let mut words = [[_mm512_setzero_si512(); 16]; G];
        for m in 0..SB / 2 {
            let (i0, i1) = (2 * m, 2 * m + 1);
            let mut du = [[zero; G]; 2];
            let mut z = [[zero; G]; 2];
            for e in 0..2 {
                let i = 2 * m + e;
                if i >= ns {
                    continue;
                }
                let gi = first + i;
                // the rows this column group reads of the pair 8 ahead (u is streamed, h
                // gathered: neither is found by the hardware prefetcher in time)
                let ahead = gi + 8;
                if ahead < first + ns {
                    let (ua, xa, ya) = (
                        u.as_ptr().add((u_row0 + i + 8) * d + k0),
                        h.row(*src.get_unchecked(ahead) as usize).as_ptr().add(k0),
                        h.row(*dst.get_unchecked(ahead) as usize).as_ptr().add(k0),
                    );
                    for j in 0..G {
                        _mm_prefetch::<_MM_HINT_T0>(ua.add(16 * j) as *const i8);
                        _mm_prefetch::<_MM_HINT_T0>(xa.add(16 * j) as *const i8);
                        _mm_prefetch::<_MM_HINT_T0>(ya.add(16 * j) as *const i8);
                    }
                }
                let dl = _mm512_set1_ps(*d_logits.get_unchecked(gi));
                let ur = u.as_ptr().add((u_row0 + i) * d + k0);
                let x = h.row(*src.get_unchecked(gi) as usize).as_ptr().add(k0);
                let y = h.row(*dst.get_unchecked(gi) as usize).as_ptr().add(k0);
                for j in 0..G {
                    let uv = _mm512_loadu_ps(ur.add(16 * j));
                    // w2: dl · PReLU(u); slope: dl · w2 · min(u, 0); b1: du
                    a_w2[j] = _mm512_add_ps(a_w2[j], _mm512_mul_ps(dl, prelu(uv, slope)));
                    let gw = _mm512_mul_ps(dl, w2[j]);
                    a_sl[j] = _mm512_add_ps(a_sl[j], _mm512_mul_ps(gw, _mm512_min_ps(uv, zero)));
                    // du = gw · (slope + (1 - slope) · [u > 0])
                    let pos = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(uv, zero), one);
                    let v = _mm512_mul_ps(gw, _mm512_add_ps(slope, _mm512_mul_ps(one_minus, pos)));
                    a_b1[j] = _mm512_add_ps(a_b1[j], v);
                    du[e][j] = v;
                    z[e][j] = _mm512_mul_ps(
                        _mm512_loadu_ps(x.add(16 * j)),
                        _mm512_loadu_ps(y.add(16 * j)),
                    );
                }
            }
            let (q, r) = (i0 / 32, (i0 % 32) / 2);
            for j in 0..G {
                let k = k0 + 16 * j;
                store_bf16(s.du_a.as_mut_ptr().add(i0 * kp + k), du[0][j]);
                store_bf16(s.du_a.as_mut_ptr().add(i1 * kp + k), du[1][j]);
                words[j][m % 16] = pair(du[0][j], du[1][j]);
                // z as the B operand: column tile k / 16, row pair (q, r)
                let base = (((k / 16) * kc + q) * 16 + r) * 32;
                _mm512_storeu_si512(
                    z_b.data.as_mut_ptr().add(base) as *mut __m512i,
                    pair(z[0][j], z[1][j]),
                );
            }
            if m % 16 == 15 {
                // duᵀ row o = k + c holds pair words m - 15 ..= m
                for (j, w) in words.iter_mut().enumerate() {
                    transpose16(w);
                    for (c, row) in w.iter().enumerate() {
                        let o = k0 + 16 * j + c;
                        _mm512_storeu_si512(du_t.add(o * SB / 2 + m - 15) as *mut __m512i, *row);
                    }
                }
            }
        }
        for j in 0..G {
            _mm512_storeu_ps(aw2.as_mut_ptr().add(k0 + 16 * j), a_w2[j]);
            _mm512_storeu_ps(asl.as_mut_ptr().add(k0 + 16 * j), a_sl[j]);
            _mm512_storeu_ps(ab1.as_mut_ptr().add(k0 + 16 * j), a_b1[j]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_products_stay_f32_on_the_hardware_backends_only() {
        assert!(!tiles_pay(Backend::Amx, MIN_TILE_ROWS, MIN_TILE_MACS - 1));
        assert!(!tiles_pay(Backend::Amx, MIN_TILE_ROWS - 1, MIN_TILE_MACS));
        assert!(tiles_pay(Backend::Amx, MIN_TILE_ROWS, MIN_TILE_MACS));
        assert!(!tiles_pay(
            Backend::Avx512Bf16,
            MIN_TILE_ROWS - 1,
            MIN_TILE_MACS
        ));
        assert!(tiles_pay(Backend::Avx512Bf16, MIN_TILE_ROWS, MIN_TILE_MACS));
        assert!(tiles_pay(Backend::Emulated, 1, 1));
    }

    #[test]
    fn bf16_rounding_is_nearest_even() {
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0)
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        // just above halfway rounds up
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0 + 1.0 / 65536.0), 0x3f81);
        // 1 + 3·2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: ties to even (up)
        assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
        assert_eq!(to_bf16(f32::INFINITY), 0x7f80);
    }

    /// The emulation, and every hardware backend this machine has.
    fn backends_here() -> Vec<Backend> {
        let mut backends = vec![Backend::Emulated];
        if amx_available() {
            backends.push(Backend::Amx);
        }
        if avx512_bf16_available() {
            backends.push(Backend::Avx512Bf16);
        }
        backends
    }

    fn lcg(seed: u64, n: usize) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    /// The explicit AVX-512 row code gives the same bits as its portable twin: the Hadamard
    /// rows, the logits (with and without `u`), and a backward sub-block's `du` (row-major and
    /// transposed), packed `z` and gradient sums; widths 48 (a padding column tile) and 256,
    /// an odd number of live rows (a zero second row in the last pair).
    #[test]
    fn avx512_row_code_matches_the_portable_code() {
        let Some(wide) = hardware_backend() else {
            return; // the x86 module runs only where a hardware bf16 product does
        };
        for d in [48usize, 256] {
            let n = 70;
            let h = Mat::from_vec(n, d, lcg(11, n * d));
            let bsz = 301;
            let src: Vec<u32> = (0..bsz).map(|i| ((i * 7 + 3) % n) as u32).collect();
            let dst: Vec<u32> = (0..bsz).map(|i| ((i * 13 + 1) % n) as u32).collect();
            let kp = round_up(d, 32);
            let np = kp;
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            // hadamard rows (a short last block: zero rows)
            for r in [0..32, 280..301] {
                let mut a = vec![7u16; RB * kp];
                let mut b = a.clone();
                hadamard_rows(&h, &src[r.clone()], &dst[r.clone()], &mut a, kp);
                unsafe { x86::hadamard_rows(&h, &src[r.clone()], &dst[r], &mut b, kp) };
                assert_eq!(a, b, "d {d}: hadamard rows");
            }
            // logits
            let c = lcg(12, RB * np);
            let (w1, b1, w2) = (lcg(13, d * d), lcg(14, d), lcg(15, d));
            let p = DecoderParams {
                w1: &w1,
                b1: &b1,
                slope: 0.3,
                w2: &w2,
                b2: -0.2,
            };
            for with_u in [false, true] {
                let (mut o1, mut o2) = (vec![0.0f32; 29], vec![0.0f32; 29]);
                let (mut u1, mut u2) = (vec![0.0f32; 29 * d], vec![1.0f32; 29 * d]);
                logits_rows(&c, np, &p, &mut o1, with_u.then_some(&mut u1[..]));
                unsafe { x86::logits_rows(&c, np, &p, &mut o2, with_u.then_some(&mut u2[..])) };
                assert_eq!(bits(&o1), bits(&o2), "d {d} u {with_u}: logits");
                if with_u {
                    assert_eq!(bits(&u1), bits(&u2), "d {d}: u");
                }
            }
            // a backward sub-block: 301 - 40 = 261 live rows from row 40
            let u: Vec<f32> = lcg(16, bsz * d);
            let dl = lcg(17, bsz);
            let fresh = || {
                let mut s = Scratch::default();
                s.shape(d, false);
                s
            };
            let (mut s1, mut s2) = (fresh(), fresh());
            let mut g1 = lcg(18, 3 * d);
            let mut g2 = g1.clone();
            let b = SubBlock {
                h: &h,
                src: &src,
                dst: &dst,
                u: &u,
                u_row0: 40,
                d_logits: &dl,
                p: &p,
                first: 40,
                ns: 261,
            };
            backward_rows(&mut s1, &b, &mut g1);
            unsafe { x86::backward_rows(&mut s2, &b, &mut g2) };
            assert_eq!(s1.du_a, s2.du_a, "d {d}: du rows");
            assert_eq!(s1.du_t, s2.du_t, "d {d}: du transposed");
            assert_eq!(
                s1.z_b.unwrap().data,
                s2.z_b.unwrap().data,
                "d {d}: packed z"
            );
            assert_eq!(bits(&g1), bits(&g2), "d {d}: w2, slope and b1 sums");
        }
        // the packed B of the products: odd shapes (tails in both directions)
        for (k, n) in [(45usize, 70usize), (745, 256), (256, 256), (1, 3), (33, 17)] {
            let v = lcg(23, k * n);
            let rows = PackedB::from_fn(k, n, |kk, nn| v[kk * n + nn]);
            assert_eq!(
                rows.data,
                PackedB::of_rows(wide, &v, k, n).data,
                "{k}x{n} rows"
            );
            let cols = PackedB::from_fn(k, n, |kk, nn| v[nn * k + kk]);
            assert_eq!(
                cols.data,
                PackedB::of_cols(wide, &v, k, n).data,
                "{k}x{n} cols"
            );
        }
        // the operands of gemm_at_b's sub-blocks: odd widths (column tails), a short sub-block
        for (m, n, rows, s0) in [(45usize, 70usize, 700usize, 512usize), (745, 256, 600, 0)] {
            let a = lcg(21, rows * m);
            let b = lcg(22, rows * n);
            let ns = SB.min(rows - s0);
            let fresh = || AtScratch {
                shape: (round_up(m, RB), n),
                at: vec![0; round_up(m, RB) * SB],
                bz: Some(PackedB::zeros(SB, n)),
                rows: vec![0.0; 2 * round_up(n, 32)],
            };
            let (mut s1, mut s2) = (fresh(), fresh());
            at_b_pack(&mut s1, m, n, &a, &b, s0, ns);
            let bz = s2.bz.as_mut().unwrap();
            unsafe { x86::at_b_pack(&mut s2.at, bz, m, n, &a, &b, s0, ns) };
            assert_eq!(s1.at, s2.at, "{m}x{n}: aᵀ");
            assert_eq!(
                s1.bz.unwrap().data,
                s2.bz.unwrap().data,
                "{m}x{n}: packed b"
            );
        }
    }

    /// The tile product against an f64 reference of the bf16-rounded operands, both backends
    /// (AMX where present), odd shapes (padding), overwrite and accumulate.
    #[test]
    fn block_product_matches_the_rounded_reference() {
        let backends = backends_here();
        for (k, n) in [(256, 256), (45, 70), (32, 32), (1, 3)] {
            let av = lcg(1, RB * k);
            let bv = lcg(2, k * n);
            let b = PackedB::from_fn(k, n, |kk, nn| bv[kk * n + nn]);
            let kp = b.kc * 32;
            let mut a = vec![0u16; RB * kp];
            for i in 0..RB {
                for kk in 0..k {
                    a[i * kp + kk] = to_bf16(av[i * k + kk]);
                }
            }
            let ldc = b.cols() + 16;
            let init = lcg(3, RB * ldc);
            for &backend in &backends {
                begin(backend);
                for acc in [false, true] {
                    let mut c = init.clone();
                    block(backend, &a, &b, &mut c, ldc, acc);
                    for i in 0..RB {
                        for nn in 0..n {
                            let r: f64 = (0..k)
                                .map(|kk| {
                                    from_bf16(to_bf16(av[i * k + kk])) as f64
                                        * from_bf16(to_bf16(bv[kk * n + nn])) as f64
                                })
                                .sum::<f64>()
                                + if acc { init[i * ldc + nn] as f64 } else { 0.0 };
                            let got = c[i * ldc + nn] as f64;
                            assert!(
                                (got - r).abs() <= 1e-5 * (1.0 + r.abs()),
                                "{backend:?} k {k} n {n} acc {acc} ({i}, {nn}): {got} vs {r}"
                            );
                        }
                        // columns past the padded N are untouched
                        for nn in b.cols()..ldc {
                            assert_eq!(c[i * ldc + nn], init[i * ldc + nn]);
                        }
                    }
                }
            }
        }
    }

    /// The general products under a scope (`mat.rs` dispatch) against f64 sums of the rounded
    /// operands: odd shapes, overwrite and accumulate, both backends; `at_b` over several parts
    /// gives the same bytes with 1 and 3 threads.
    #[test]
    fn scoped_products_match_the_rounded_reference() {
        use crate::matmul::{matmul_a_b, matmul_a_bt, matmul_at_b};
        let backends = backends_here();
        let r = |x: f32| from_bf16(to_bf16(x)) as f64;
        for &backend in &backends {
            for (m, n, k) in [
                (45usize, 70usize, 33usize),
                (3, 5, 7),
                (40, 17, 9000),
                (600, 70, 250),
            ] {
                let a = lcg(5, m * k); // [m, k] for a_bt / a_b, [k, m] for at_b
                let bt = lcg(6, n * k); // [n, k]
                let b = lcg(7, k * n); // [k, n]
                let init = lcg(8, m * n);
                let check =
                    |what: &str, got: &[f32], acc: bool, f: &dyn Fn(usize, usize) -> f64| {
                        for i in 0..m {
                            for j in 0..n {
                                let want = f(i, j) + if acc { init[i * n + j] as f64 } else { 0.0 };
                                let g = got[i * n + j] as f64;
                                assert!(
                                (g - want).abs() <= 2e-5 * (1.0 + want.abs()) * (k as f64).sqrt(),
                                "{backend:?} {what} {m}x{n}x{k} acc {acc} ({i},{j}): {g} vs {want}"
                            );
                            }
                        }
                    };
                // rows of the batch dimension: m for a_bt / a_b, k for at_b; a product AMX
                // leaves to f32 gives the same bytes as outside a scope
                let tiles = |rows: usize| tiles_pay(backend, rows, m * n * k);
                let same_as_f32 = |what: &str, f: &dyn Fn(&mut Vec<f32>)| {
                    let mut x = init.clone();
                    f(&mut x);
                    let mut y = init.clone();
                    {
                        let _off = PrecisionScope::enter(None);
                        f(&mut y);
                    }
                    assert_eq!(x, y, "{backend:?} {what} {m}x{n}x{k}: stays f32");
                };
                let _scope = PrecisionScope::enter(Some(backend));
                type Product<'x> = &'x dyn Fn(&mut Vec<f32>, bool);
                type Reference<'x> = &'x dyn Fn(usize, usize) -> f64;
                // (name, its batch rows, the product, its f64 reference)
                let products: [(&str, usize, Product, Reference); 3] = [
                    (
                        "a_bt",
                        m,
                        &|c, acc| matmul_a_bt(m, n, k, &a, &bt, c, acc),
                        &|i, j| (0..k).map(|t| r(a[i * k + t]) * r(bt[j * k + t])).sum(),
                    ),
                    (
                        "a_b",
                        m,
                        &|c, acc| matmul_a_b(m, n, k, &a, &b, c, acc),
                        &|i, j| (0..k).map(|t| r(a[i * k + t]) * r(b[t * n + j])).sum(),
                    ),
                    (
                        "at_b",
                        k,
                        &|c, acc| matmul_at_b(m, n, k, &a, &b, c, acc),
                        &|i, j| (0..k).map(|t| r(a[t * m + i]) * r(b[t * n + j])).sum(),
                    ),
                ];
                for acc in [false, true] {
                    for &(what, rows, product, reference) in &products {
                        if tiles(rows) {
                            let mut c = init.clone();
                            product(&mut c, acc);
                            check(what, &c, acc, reference);
                        } else {
                            same_as_f32(what, &|c| product(c, acc));
                        }
                    }
                }
                if k > 2 * AT_CHUNK {
                    let run = |threads: usize| {
                        let pool = rayon::ThreadPoolBuilder::new()
                            .num_threads(threads)
                            .build()
                            .unwrap();
                        let mut c = init.clone();
                        pool.install(|| {
                            let _scope = PrecisionScope::enter(Some(backend));
                            matmul_at_b(m, n, k, &a, &b, &mut c, true)
                        });
                        c.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                    };
                    assert_eq!(
                        run(1),
                        run(3),
                        "{backend:?}: at_b depends on the thread count"
                    );
                }
            }
        }
        // outside a scope the products are f32 again
        assert_eq!(scoped(), None);
    }
}
