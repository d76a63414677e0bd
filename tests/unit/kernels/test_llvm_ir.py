"""The LLVM IR parser: the recorded XLA:CPU kernels (hand-counted), a hand-written module with atomics,
allocas, a CAS loop and a multi-line switch, and strictness (FILE:LINE errors, scalable vectors)."""

from __future__ import annotations

import pathlib
import re

import pytest

from invariants.kernels import KernelCodeError, KernelFacts, parse_kernel_code
from invariants.kernels.llvm_ir import parse_llvm_ir

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "kernels"


def _kernel(release: str, program: str, part: str) -> tuple[KernelFacts, str]:
    (path,) = (DATA / f"jaxlib-{release}" / "cpu" / program).glob(f"*.{part}.ir-with-opt.ll")
    text = path.read_text()
    (facts,) = parse_llvm_ir(text, path.name)
    return facts, text


@pytest.mark.parametrize("release", ["0.10.1", "0.10.2"])
def test_cpu_scatter_kernel(release: str) -> None:
    """The f32 scatter-add on XLA:CPU: no atomics, a loop nest of two back-edges, <8 x float> (the fixture was
    recorded on a host whose functions say "prefer-vector-width"="256")."""
    facts, text = _kernel(release, "grad_take.f32", "wrapped_scatter")
    assert facts.name == "wrapped_scatter"
    assert facts.language == "llvm"
    assert '"prefer-vector-width"="256"' in text
    assert facts.vector_width == 256 > 0
    assert (facts.atomics, facts.cas_atomics, facts.cas_loops, facts.float_atomics) == ((), 0, 0, 0)
    assert facts.loops == 2  # .preheader.us -> itself, .split5.us -> %9
    # entry 11, %9 5, .preheader.us.preheader 6, .preheader.us 15, .split5.us 3, exit 1
    assert facts.instructions == 41
    assert facts.local_bytes == 0


def test_cpu_scalar_and_alloca_kernels() -> None:
    broadcast, _ = _kernel("0.10.2", "grad_take.f32", "wrapped_broadcast_kernel_module")
    assert broadcast.vector_width == 0  # 32 scalar stores a row
    assert (broadcast.loops, broadcast.instructions, broadcast.atomics) == (1, 86, ())
    take, _ = _kernel("0.10.2", "take.f32", "broadcast_select_fusion_kernel_module")
    assert take.vector_width == 0
    convert, text = _kernel("0.10.2", "grad_take.bf16", "__compute_module_wrapped_convert")
    assert "alloca [32 x bfloat], align 64" in text
    assert convert.local_bytes == 64
    assert convert.vector_width == 256  # <8 x float>, <8 x i32>
    assert re.search(r"<8 x i16>", text) and re.search(r"<8 x i1>", text)


HAND = """; ModuleID = 'hand'
source_filename = "hand"
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

%struct.pair = type { i8, i32 }
%opaque = type opaque
$c = comdat any
@g = internal addrspace(1) global [4 x float] zeroinitializer, align 4
@str = private unnamed_addr constant [6 x i8] c"a;b\\22\\00\\00", align 1
module asm "; not a comment"

; Function Attrs: nounwind
declare float @llvm.nvvm.ex2.approx.f(float) #0

define void @kernel(ptr addrspace(1) noalias %p, i32 %n) #0 comdat($c) {
entry:
  %buf = alloca [4 x i32], align 16
  %s = alloca %struct.pair, align 4
  %two = alloca i64, i32 2, align 8
  %dyn = alloca i8, i32 %n, align 1
  %o = alloca %opaque, align 1
  %old = atomicrmw fadd ptr addrspace(1) %p, float 1.000000e+00 syncscope("device") monotonic, align 4
  %v = load <4 x float>, ptr addrspace(1) %p, align 16, !invariant.load !1
  #dbg_value(i32 %n, !2, !DIExpression(), !3)
  br label %loop

loop:                                             ; preds = %loop, %exit, %entry
  %cur = phi i32 [ 0, %entry ],
                 [ %got, %loop ], [ %got, %exit ]
  %pair = cmpxchg ptr addrspace(1) %p, i32 %cur, i32 1 syncscope("device") monotonic monotonic, align 4
  %got = extractvalue { i32, i1 } %pair, 0
  %ok = extractvalue { i32, i1 } %pair, 1
  br i1 %ok, label %exit, label %loop

exit:                                             ; preds = %loop
  switch i32 %n, label %done [
    i32 0, label %loop
    i32 1, label %done
  ]

"done":                                           ; preds = %exit, %exit
  %x = cmpxchg weak volatile ptr addrspace(1) %p, i32 0, i32 1 seq_cst seq_cst, align 4
  %m = atomicrmw volatile umax ptr addrspace(1) %p, i64 7 monotonic, align 8
  %h = atomicrmw fadd ptr addrspace(1) %p, <2 x half> <half 0xH3C00, half 0xH3C00> monotonic, align 4
  %y = tail call fast float @llvm.nvvm.ex2.approx.f(float 1.0)
  %z = or disjoint i32 %n, 1
  %w = zext nneg i32 %z to i64
  call void asm sideeffect "membar.gl; // <16 x float>", ""()
  ret void
}

define internal i32 @scalar(i32 %a) {
  %b = add nuw nsw i32 %a, 1
  ret i32 %b
}

attributes #0 = { nounwind "target-cpu"="sm_80" }

!llvm.module.flags = !{!0}
!0 = !{i32 1, !"x", i32 2}
!1 = !{}
!2 = distinct !DILocalVariable(name: "n", scope: !3)
!3 = !DILocation(line: 1, scope: !2)
"""


def test_hand_written_module() -> None:
    kernel, scalar = parse_llvm_ir(HAND, "hand.ll")
    assert kernel.atomics == (
        ("atomicrmw fadd <2 x half>", 1),
        ("atomicrmw fadd float", 1),
        ("atomicrmw umax i64", 1),
        ("cmpxchg i32", 2),
    )
    assert (kernel.cas_atomics, kernel.cas_loops) == (2, 1)  # the one in %loop; not the one in %done
    assert kernel.float_atomics == 2
    # [4 x i32] 16 + { i8, i32 } 8 + i64 × 2 16; a dynamic count and an opaque type: nothing
    assert kernel.local_bytes == 40
    assert kernel.loops == 2  # %loop -> %loop, %exit's switch -> %loop
    assert kernel.vector_width == 128  # <4 x float>; the asm string's '<16 x float>' is text
    # entry 8, loop 5, exit 1 (the switch over 4 lines), done 8
    assert kernel.instructions == 22
    assert scalar == KernelFacts("scalar", "llvm", "hand.ll", instructions=2)
    assert parse_kernel_code({"hand.ll": HAND}) == [kernel, scalar]


def test_declarations_only() -> None:
    text = 'source_filename = "m"\ndeclare void @f(ptr)\n\n!0 = !{}\n'
    assert parse_llvm_ir(text, "d.ll") == []
    assert parse_llvm_ir("", "e.ll") == []


def test_vector_widths() -> None:
    def width(ty: str) -> int:
        text = f"define void @f(ptr %p) {{\n  %v = load {ty}, ptr %p, align 1\n  ret void\n}}\n"
        (facts,) = parse_llvm_ir(text, "v.ll")
        return facts.vector_width

    assert width("<16 x i8>") == 128
    assert width("<8 x i1>") == 8
    assert width("<4 x ptr>") == 256  # 64 bits a pointer lane
    assert width("<2 x double>") == 128
    assert width("{ <8 x bfloat>, i32 }") == 128
    assert width("[2 x <4 x i64>]") == 256
    assert width("i64") == 0


def _function(body: str) -> str:
    return (
        'source_filename = "m"\n'
        "\n"
        "define void @f(ptr %p) {\n"  # line 3
        "entry:\n"  # line 4
        + body  # from line 5
        + "  ret void\n}\n"
    )


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        (
            _function("  %v = load <vscale x 4 x float>, ptr %p, align 16\n"),
            5,
            "scalable vector type '<vscale x 4 x float ...>' is not supported",
        ),
        (_function("  %x = frobnicate i32 1, 2\n"), 5, "unknown instruction 'frobnicate'"),
        (_function("  %x = tail add i32 1, 2\n"), 5, "'tail' before 'add', not 'call'"),
        (_function("  br label %nowhere\n"), 5, "branch to an undefined label '%nowhere'"),
        (_function("  %x = atomicrmw frob ptr %p, i32 1 monotonic\n"), 5, "unknown atomicrmw operation"),
        (_function("  #dbg_frob(i32 1)\n"), 5, "unknown debug record"),
        (_function("entry:\n"), 5, "label 'entry' defined twice"),
        (_function("  switch i32 0, label %entry [\n    i32 1, label %entry\n"), 5, "unbalanced '['"),
        ("frob = 1\n", 1, "unknown top-level entity: 'frob = 1'"),
        ('source_filename = "m"\n\nuselistorder ptr @f, { 1, 0 }\n', 3, "unknown top-level entity"),
        ("define void @f()\n", 1, "unknown function definition"),
        (_function("").removesuffix("}\n"), 3, "function 'f' is not closed"),
    ],
)
def test_strictness(text: str, line: int, what: str) -> None:
    with pytest.raises(KernelCodeError) as err:
        parse_llvm_ir(text, "bad.ll")
    message = str(err.value)
    assert message.startswith(f"bad.ll:{line}: "), message
    assert what in message


def test_truncated_fixture() -> None:
    _, text = _kernel("0.10.2", "grad_take.f32", "wrapped_scatter")
    cut = "\n".join(text.splitlines()[:40])
    with pytest.raises(KernelCodeError, match=r"^cut\.ll:7: function 'wrapped_scatter' is not closed"):
        parse_kernel_code({"cut.ll": cut})
