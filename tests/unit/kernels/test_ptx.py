"""The PTX parser: every recorded fixture, hand-counted facts of the real kernels (the 0.10.1 -> 0.10.2 A100
regression among them), hand-written constructs, and strictness (FILE:LINE errors)."""

from __future__ import annotations

import pathlib
import re

import pytest

from invariants.kernels import KernelCodeError, KernelFacts, kernel_files, name_key, parse_kernel_code
from invariants.kernels.ptx import parse_ptx

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "kernels"
RELEASES = ("0.10.1", "0.10.2")
TARGETS = ("gpu-a100", "gpu-l4", "gpu-h100", "cpu")
PROGRAMS = ("take.f32", "grad_take.f32", "grad_take.bf16", "grad_index.f32")
FOLDERS = [DATA / f"jaxlib-{r}" / t / p for r in RELEASES for t in TARGETS for p in PROGRAMS]
KERNEL_FILES = sorted(p for p in DATA.rglob("*") if p.name.endswith((".ptx", ".ir-with-opt.ll")))


def _facts(release: str, target: str, program: str) -> dict[str, KernelFacts]:
    folder = DATA / f"jaxlib-{release}" / target / program
    files = {n: (folder / n).read_text() for n in kernel_files(p.name for p in folder.iterdir())}
    facts = parse_kernel_code(files)
    by_name = {f.name: f for f in facts}
    assert len(by_name) == len(facts), "two kernels of one name"
    return by_name


def test_fixtures_exist() -> None:
    for folder in FOLDERS:
        names = [p.name for p in folder.iterdir()]
        assert sum(n.endswith("after_optimizations.txt") for n in names) == 1, folder
        assert kernel_files(names), folder
    assert sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file()) < 1_000_000


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_every_fixture_parses(path: pathlib.Path) -> None:
    """Every real kernel file parses, twice alike, and each kernel is named by an instruction of its HLO."""
    text = path.read_text()
    first = parse_kernel_code({path.name: text})
    assert first == parse_kernel_code({path.name: text})
    if not text.strip():
        assert first == []  # a module without kernels
        return
    assert first
    hlo = next(path.parent.glob("*after_optimizations.txt")).read_text()
    names = {name_key(n) for n in re.findall(r"^\s*(?:ROOT )?%?([\w.\-]+) = ", hlo, re.M)}
    for facts in first:
        assert facts.language == ("ptx" if path.suffix == ".ptx" else "llvm")
        assert facts.source == path.name
        assert facts.key in names, facts.name
        assert facts.instructions > 0
        assert 0 <= facts.cas_loops <= facts.cas_atomics <= sum(n for _, n in facts.atomics)
        assert facts.float_atomics <= sum(n for _, n in facts.atomics)


# The scatter kernel of every GPU gradient, counted by hand from the fixtures: atomics, CAS, CAS in loops,
# float atomics, loops, vector width.
_NATIVE_F32 = ((("atom.add.f32", 4),), 0, 0, 4, 0, 0)
_CAS_F32 = ((("atom.cas.b32", 4),), 4, 4, 0, 4, 0)
_H100_F32 = ((("atom.add.v4.f32", 1),), 0, 0, 1, 0, 128)
_H100_BF16 = ((("atom.add.noftz.bf16", 4),), 0, 0, 4, 0, 0)
SCATTER = {
    ("0.10.1", "gpu-a100", "grad_take.f32"): _NATIVE_F32,
    ("0.10.1", "gpu-a100", "grad_index.f32"): _NATIVE_F32,
    ("0.10.1", "gpu-a100", "grad_take.bf16"): _CAS_F32,
    ("0.10.2", "gpu-a100", "grad_take.f32"): _CAS_F32,
    ("0.10.2", "gpu-a100", "grad_index.f32"): _CAS_F32,
    ("0.10.2", "gpu-a100", "grad_take.bf16"): _CAS_F32,
    ("0.10.1", "gpu-l4", "grad_take.f32"): _NATIVE_F32,
    ("0.10.1", "gpu-l4", "grad_index.f32"): _NATIVE_F32,
    ("0.10.1", "gpu-l4", "grad_take.bf16"): _CAS_F32,
    ("0.10.2", "gpu-l4", "grad_take.f32"): _CAS_F32,
    ("0.10.2", "gpu-l4", "grad_index.f32"): _CAS_F32,
    ("0.10.2", "gpu-l4", "grad_take.bf16"): _CAS_F32,
    ("0.10.1", "gpu-h100", "grad_take.f32"): _H100_F32,
    ("0.10.1", "gpu-h100", "grad_index.f32"): _H100_F32,
    ("0.10.1", "gpu-h100", "grad_take.bf16"): _H100_BF16,
    ("0.10.2", "gpu-h100", "grad_take.f32"): _H100_F32,
    ("0.10.2", "gpu-h100", "grad_index.f32"): _H100_F32,
    ("0.10.2", "gpu-h100", "grad_take.bf16"): _H100_BF16,
}


@pytest.mark.parametrize(
    ("release", "target", "program"), sorted(SCATTER), ids=map("-".join, sorted(SCATTER))
)
def test_scatter_kernel_facts(release: str, target: str, program: str) -> None:
    facts = _facts(release, target, program)
    assert sorted(facts) == ["input_scatter_fusion", "loop_broadcast_fusion"]
    s = facts["input_scatter_fusion"]
    got = (s.atomics, s.cas_atomics, s.cas_loops, s.float_atomics, s.loops, s.vector_width)
    assert got == SCATTER[release, target, program]
    assert s.local_bytes == 0
    assert facts["loop_broadcast_fusion"].atomics == ()


def test_a100_regression_is_below_identical_hlo() -> None:
    """0.10.1 -> 0.10.2 on A100: the same optimized HLO, native f32 atomics -> CAS loops. (Metadata differs,
    and 0.10.2 gives loop fusions a backend_config of defaults, native_emitter_backend_config included.)"""

    def hlo(release: str) -> list[str]:
        folder = DATA / f"jaxlib-{release}" / "gpu-a100" / "grad_take.f32"
        path = next(folder.glob("*after_optimizations.txt"))
        lines = [ln for ln in path.read_text().splitlines() if ln.startswith(("%", "ENTRY", " ", "}"))]
        lines = [re.sub(r", metadata=\{[^}]*\}", "", ln) for ln in lines]
        return [re.sub(r", backend_config=\{.*\}$", "", ln) for ln in lines]

    assert hlo("0.10.1") == hlo("0.10.2")
    old = _facts("0.10.1", "gpu-a100", "grad_take.f32")["input_scatter_fusion"]
    new = _facts("0.10.2", "gpu-a100", "grad_take.f32")["input_scatter_fusion"]
    assert (old.float_atomics, old.cas_atomics, old.cas_loops) == (4, 0, 0)
    assert (new.float_atomics, new.cas_atomics, new.cas_loops) == (0, 4, 4)


def test_kernel_counts_by_hand() -> None:
    """Instruction counts and vector widths of the small kernels, counted by hand."""
    a100 = _facts("0.10.2", "gpu-a100", "grad_take.f32")
    # ld.param, cvta, mov ×2, shl ×2, or, mul.wide, add, st.global.v4.b32, ret
    broadcast = a100["loop_broadcast_fusion"]
    assert (broadcast.instructions, broadcast.vector_width) == (11, 128)
    # 17 to the bounds check, 7 to the first load, 4 retry loops of 5 (add, cas, setp, mov, bra), 3 loads, ret
    assert a100["input_scatter_fusion"].instructions == 48
    old = _facts("0.10.1", "gpu-a100", "grad_take.f32")["input_scatter_fusion"]
    assert old.instructions == 28
    # H100 broadcasts zeros with a scalar st.global.b32; A100 bf16 with st.global.v2.b32
    assert _facts("0.10.2", "gpu-h100", "grad_take.f32")["loop_broadcast_fusion"].vector_width == 0
    assert _facts("0.10.2", "gpu-a100", "grad_take.bf16")["loop_broadcast_fusion"].vector_width == 64
    for target, kernels in (("gpu-a100", 1), ("gpu-l4", 2), ("gpu-h100", 1)):
        take = _facts("0.10.2", target, "take.f32")
        assert len(take) == kernels
        assert take["loop_select_fusion"].vector_width == 128  # ld.global.nc.v4.b32, st.global.v4.b32
        assert all(f.atomics == () and f.loops == 0 for f in take.values())


HAND = """//
// Generated by hand: constructs XLA's PTX has, and some it may have
//

.version 8.8
.target sm_80
.address_size 64

/* a block
   comment */
.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.global .align 1 .b8 $str[4] = {104, 105, 10, 0};
.extern .shared .align 16 .b8 global_smem[];

.func  (.param .b32 func_retval0) helper(
	.param .b32 helper_param_0
)
.noreturn
{
	.reg .b32 	%r<3>;

	ld.param.b32 	%r1, [helper_param_0];
	st.param.b32 	[func_retval0], %r1;
	ret;

}
	// .globl	depot
.visible .entry depot(
	.param .u64 .ptr .align 16 depot_param_0,
	.param .align 16 .b8 depot_param_1[32]
)
.maxntid 256, 1, 1
.minnctapersm 2
{
	.local .align 8 .b8 	__local_depot0[40];
	.local .b32 	extra[2];
	.shared .align 4 .b8 	shared_0[1024];
	.reg .b64 	%SP;
	.reg .b64 	%SPL;
	.reg .pred 	%p<3>;
	.reg .b32 	%r<9>;
	.reg .b64 	%rd<4>;

	.loc	1 2 3
	mov.b64 	%SPL, __local_depot0; /* an inline comment */ cvta.local.u64 	%SP, %SPL;
	ld.param.b64 	%rd1, [depot_param_0];
	atom.global.cas.b32 	%r1, [%rd1], 0, 1;   // a CAS outside any loop
	red.relaxed.gpu.global.add.f32 	[%rd1+4], 0f3F800000;
$L__BB0_1:
	ld.local.v2.b64 	{%rd2, %rd3}, [%SP];
	add.s32 	%r2, %r2, 1;
	setp.lt.s32 	%p1, %r2, 10;
	@%p1 bra 	$L__BB0_1;
	@!%p2 bra.uni 	$L__BB0_3;
	// begin inline asm
	{
	.reg .pred p;
	setp.ne.b32 p, %r3, 0;
	@p atom.shared.add.noftz.f16x2 %r4, [%rd1], %r5;
	}
	// end inline asm
$L__BB0_3:
	{ // callseq 0, 0
	.param .b64 param0;
	st.param.b64 	[param0], %rd1;
	.param .b32 retval0;
	call.uni (retval0),
	vprintf,
	(
	param0,
	param1
	);
	} // callseq 0
	ret;

}
"""


def test_hand_written_module() -> None:
    helper, depot = parse_ptx(HAND, "hand.ptx")
    assert helper == KernelFacts("helper", "ptx", "hand.ptx", instructions=3)
    assert depot.name == "depot"
    assert depot.atomics == (("atom.add.noftz.f16x2", 1), ("atom.cas.b32", 1), ("red.add.f32", 1))
    assert (depot.cas_atomics, depot.cas_loops) == (1, 0)
    assert depot.float_atomics == 2  # red.add.f32 and atom.add.noftz.f16x2
    assert depot.local_bytes == 48  # __local_depot0[40] + extra: 2 × .b32
    assert depot.loops == 1  # the bra back to $L__BB0_1; the bra.uni forward is none
    assert depot.vector_width == 128  # ld.local.v2.b64
    # mov, cvta, ld.param, atom, red, ld.local, add, setp, bra, bra.uni, setp, atom, st.param, call, ret
    assert depot.instructions == 15


def test_cas_retry_loop_and_scoped_labels() -> None:
    text = """.version 8.8
.target sm_89
.address_size 64
.visible .entry k()
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<9>;
	.reg .b64 	%rd<2>;
	atom.relaxed.sys.global.cas.b32 	%r1, [%rd1], %r2, %r3;
$L__BB0_1:
	add.rn.f32 	%r4, %r2, 0f3F800000;
	atom.relaxed.sys.global.cas.b32 	%r1, [%rd1], %r2, %r4;
	setp.ne.b32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_1;
	{
	$L__BB0_1: atom.acq_rel.gpu.shared::cta.cas.b64 	%rd1, [%rd1], %rd1, %rd1;
	@%p2 bra 	$L__BB0_1;
	}
	atom.global.exch.b32 	%r5, [%rd1], %r6;
	ret;
}
"""
    (k,) = parse_ptx(text, "k.ptx")
    assert k.atomics == (("atom.cas.b32", 2), ("atom.cas.b64", 1), ("atom.exch.b32", 1))
    assert (k.cas_atomics, k.cas_loops, k.loops, k.float_atomics) == (3, 2, 2, 0)


OTHER = """.version 8.4
.target sm_90a, debug
.address_size 64
.file	1 "/tmp/x//y.cu", 1700000000, 1234
.file	2 "b.h"
.pragma "nounroll";

.weak .func  f0(
	.reg .b32 a
)
{
	ret;
}
.alias f1, f0;
.visible .entry k2()
.maxntid 32, 1, 1
.maxnreg 64
.explicitcluster
.reqnctapercluster 2, 1, 1
.maxclusterrank 8
.pragma "nounroll";
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<3>;
	.pragma "nounroll";
	.loc	1 10 3, function_name $L__info_string0, inlined_at 2 4 5
	prototype_0 : .callprototype ()_ (.param .b64 _, .param .align 16 .b8 _[16]);
	ts: .branchtargets $L__BB1, $L__BB2;
$L__BB1:
	mbarrier.try_wait.parity.shared::cta.b64 %p1, [%rd1], %r1;
	wgmma.fence.sync.aligned;
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%rd1], [%rd2, {%r1}], [%rd1];
	red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%rd1], %r1, [%rd2];
	ld.global.nc.L1::no_allocate.v8.f32 {%r1, %r1, %r1, %r1, %r1, %r1, %r1, %r1}, [%rd1];
	brx.idx %r1, ts;
$L__BB2:
	call (%r1), %rd1, (%rd2), prototype_0;
	ret;
}
.section	.debug_abbrev
{
.b8 1
.b8 17
}
"""


def test_other_directives() -> None:
    """What XLA does not emit today but PTX has: .weak .func, .alias, cluster and register directives, a
    header .pragma, .callprototype, .branchtargets with brx.idx, debug .file/.loc and a .section."""
    f0, k2 = parse_ptx(OTHER, "other.ptx")
    assert (f0.name, f0.instructions) == ("f0", 1)
    assert k2.atomics == (("red.async.add.u32", 1),)
    assert (k2.float_atomics, k2.loops, k2.vector_width, k2.instructions) == (0, 1, 256, 8)


def test_empty_and_comment_only_modules() -> None:
    assert parse_ptx("", "empty.ptx") == []
    assert parse_ptx("//\n// nothing\n//\n\n.version 8.8\n.target sm_90a\n.address_size 64\n", "h.ptx") == []


def _module(body: str, header: str = "") -> str:
    return (
        ".version 8.8\n.target sm_80\n.address_size 64\n"
        + header
        + ".visible .entry k(\n\t.param .u64 .ptr .align 16 k_param_0\n)\n.reqntid 128, 1, 1\n{\n"
        + "\t.reg .b32 \t%r<4>;\n"
        + body
        + "\tret;\n\n}\n"
    )


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        (_module("", header=".frobnicate 3;\n"), 4, "unknown directive: '.frobnicate 3'"),
        (_module("\t.bogus .b32 \t%x;\n"), 10, "unknown directive: '.bogus .b32 %x'"),
        (_module("\tfrob.b32 \t%r1, %r2;\n"), 10, "unknown opcode 'frob': 'frob.b32 %r1, %r2'"),
        (_module("\tcp.sideways.b32 \t%r1;\n"), 10, "unknown opcode 'cp.sideways'"),
        (_module("\tatom.global.weird.add.f32 \t%r1, [%r2], %r3;\n"), 10, "unknown atom qualifier '.weird'"),
        (_module("\tatom.global.f32 \t%r1, [%r2], %r3;\n"), 10, "atom without an operation or a type"),
        (_module("\t@%p1 bra \t$L__BB0_7;\n"), 10, "branch to an undefined label '$L__BB0_7'"),
        (_module("\t.local .align 4 .q8 \td[4];\n"), 10, "unknown declaration qualifier '.q8'"),
        (_module("\tmov.b32 \t%r1, 0\n"), 10, "statement not ended with ';'"),
        (_module("").replace(".reqntid 128, 1, 1", ".maxthreads 128"), 4, "unknown function directive"),
        (_module("").replace(".target sm_80", ".target gfx90a"), 2, "unknown directive: '.target gfx90a'"),
        (".target sm_80\n", 1, "expected .version first"),
        (_module("") + "\tmov.b32 \t%r1, 0;\n", 13, "unknown statement: 'mov.b32 %r1, 0'"),
        (_module("") + "}\n", 13, "'}' outside a function"),
        (_module("/* open\n"), 10, "unterminated comment"),
    ],
)
def test_strictness(text: str, line: int, what: str) -> None:
    with pytest.raises(KernelCodeError) as err:
        parse_ptx(text, "bad.ptx")
    message = str(err.value)
    assert message.startswith(f"bad.ptx:{line}: "), message
    assert what in message


def test_truncated_function() -> None:
    """A function without its closing '}': the error names the function's header line."""
    text = (DATA / "jaxlib-0.10.2/gpu-a100/grad_take.f32").glob("*.3.ptx").__next__().read_text()
    truncated = text[: text.rindex("}")]
    with pytest.raises(KernelCodeError, match=r"^cut\.ptx:11: function 'input_scatter_fusion' is not closed"):
        parse_ptx(truncated, "cut.ptx")
    cut_mid = "\n".join(text.splitlines()[:40])
    with pytest.raises(KernelCodeError, match=r"^cut\.ptx:11: .*not closed.*'\.entry input_scatter_fusion'"):
        parse_ptx(cut_mid, "cut.ptx")
    with pytest.raises(KernelCodeError, match=r"^cut\.ptx:11: .*not closed"):
        parse_kernel_code({"cut.ptx": cut_mid})
