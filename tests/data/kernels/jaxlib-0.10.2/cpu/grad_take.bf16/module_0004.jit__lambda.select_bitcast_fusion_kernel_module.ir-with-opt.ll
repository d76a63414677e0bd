; ModuleID = '__compute_module_select_bitcast_fusion_kernel_module'
source_filename = "__compute_module_select_bitcast_fusion_kernel_module"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; Function Attrs: nofree norecurse nosync nounwind memory(readwrite, target_mem: none) uwtable
define noalias noundef ptr @select_bitcast_fusion(ptr nofree readonly captures(none) %0) local_unnamed_addr #0 {
vector.ph:
  %1 = getelementptr inbounds nuw i8, ptr %0, i64 24
  %2 = load ptr, ptr %1, align 8, !invariant.load !3
  %3 = load ptr, ptr %2, align 8, !invariant.load !3, !dereferenceable !4
  %4 = getelementptr inbounds nuw i8, ptr %2, i64 16
  %5 = load ptr, ptr %4, align 8, !invariant.load !3, !dereferenceable !4
  tail call void @llvm.experimental.noalias.scope.decl(metadata !5)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !8)
  br label %vector.body

vector.body:                                      ; preds = %vector.body, %vector.ph
  %index = phi i64 [ 0, %vector.ph ], [ %index.next.3, %vector.body ]
  %6 = getelementptr inbounds nuw [4 x i8], ptr %3, i64 %index
  %7 = getelementptr inbounds nuw i8, ptr %6, i64 32
  %8 = getelementptr inbounds nuw i8, ptr %6, i64 64
  %9 = getelementptr inbounds nuw i8, ptr %6, i64 96
  %wide.load = load <8 x i32>, ptr %6, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load1 = load <8 x i32>, ptr %7, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load2 = load <8 x i32>, ptr %8, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load3 = load <8 x i32>, ptr %9, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %10 = lshr <8 x i32> %wide.load, splat (i32 18)
  %11 = lshr <8 x i32> %wide.load1, splat (i32 18)
  %12 = lshr <8 x i32> %wide.load2, splat (i32 18)
  %13 = lshr <8 x i32> %wide.load3, splat (i32 18)
  %14 = and <8 x i32> %10, splat (i32 8192)
  %15 = and <8 x i32> %11, splat (i32 8192)
  %16 = and <8 x i32> %12, splat (i32 8192)
  %17 = and <8 x i32> %13, splat (i32 8192)
  %18 = add <8 x i32> %14, %wide.load
  %19 = add <8 x i32> %15, %wide.load1
  %20 = add <8 x i32> %16, %wide.load2
  %21 = add <8 x i32> %17, %wide.load3
  %22 = getelementptr inbounds nuw [4 x i8], ptr %5, i64 %index
  %23 = getelementptr inbounds nuw i8, ptr %22, i64 32
  %24 = getelementptr inbounds nuw i8, ptr %22, i64 64
  %25 = getelementptr inbounds nuw i8, ptr %22, i64 96
  store <8 x i32> %18, ptr %22, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %19, ptr %23, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %20, ptr %24, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %21, ptr %25, align 4, !alias.scope !8, !noalias !5
  %index.next = or disjoint i64 %index, 32
  %26 = getelementptr inbounds nuw [4 x i8], ptr %3, i64 %index.next
  %27 = getelementptr inbounds nuw i8, ptr %26, i64 32
  %28 = getelementptr inbounds nuw i8, ptr %26, i64 64
  %29 = getelementptr inbounds nuw i8, ptr %26, i64 96
  %wide.load.1 = load <8 x i32>, ptr %26, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load1.1 = load <8 x i32>, ptr %27, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load2.1 = load <8 x i32>, ptr %28, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load3.1 = load <8 x i32>, ptr %29, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %30 = lshr <8 x i32> %wide.load.1, splat (i32 18)
  %31 = lshr <8 x i32> %wide.load1.1, splat (i32 18)
  %32 = lshr <8 x i32> %wide.load2.1, splat (i32 18)
  %33 = lshr <8 x i32> %wide.load3.1, splat (i32 18)
  %34 = and <8 x i32> %30, splat (i32 8192)
  %35 = and <8 x i32> %31, splat (i32 8192)
  %36 = and <8 x i32> %32, splat (i32 8192)
  %37 = and <8 x i32> %33, splat (i32 8192)
  %38 = add <8 x i32> %34, %wide.load.1
  %39 = add <8 x i32> %35, %wide.load1.1
  %40 = add <8 x i32> %36, %wide.load2.1
  %41 = add <8 x i32> %37, %wide.load3.1
  %42 = getelementptr inbounds nuw [4 x i8], ptr %5, i64 %index.next
  %43 = getelementptr inbounds nuw i8, ptr %42, i64 32
  %44 = getelementptr inbounds nuw i8, ptr %42, i64 64
  %45 = getelementptr inbounds nuw i8, ptr %42, i64 96
  store <8 x i32> %38, ptr %42, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %39, ptr %43, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %40, ptr %44, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %41, ptr %45, align 4, !alias.scope !8, !noalias !5
  %index.next.1 = or disjoint i64 %index, 64
  %46 = getelementptr inbounds nuw [4 x i8], ptr %3, i64 %index.next.1
  %47 = getelementptr inbounds nuw i8, ptr %46, i64 32
  %48 = getelementptr inbounds nuw i8, ptr %46, i64 64
  %49 = getelementptr inbounds nuw i8, ptr %46, i64 96
  %wide.load.2 = load <8 x i32>, ptr %46, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load1.2 = load <8 x i32>, ptr %47, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load2.2 = load <8 x i32>, ptr %48, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load3.2 = load <8 x i32>, ptr %49, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %50 = lshr <8 x i32> %wide.load.2, splat (i32 18)
  %51 = lshr <8 x i32> %wide.load1.2, splat (i32 18)
  %52 = lshr <8 x i32> %wide.load2.2, splat (i32 18)
  %53 = lshr <8 x i32> %wide.load3.2, splat (i32 18)
  %54 = and <8 x i32> %50, splat (i32 8192)
  %55 = and <8 x i32> %51, splat (i32 8192)
  %56 = and <8 x i32> %52, splat (i32 8192)
  %57 = and <8 x i32> %53, splat (i32 8192)
  %58 = add <8 x i32> %54, %wide.load.2
  %59 = add <8 x i32> %55, %wide.load1.2
  %60 = add <8 x i32> %56, %wide.load2.2
  %61 = add <8 x i32> %57, %wide.load3.2
  %62 = getelementptr inbounds nuw [4 x i8], ptr %5, i64 %index.next.1
  %63 = getelementptr inbounds nuw i8, ptr %62, i64 32
  %64 = getelementptr inbounds nuw i8, ptr %62, i64 64
  %65 = getelementptr inbounds nuw i8, ptr %62, i64 96
  store <8 x i32> %58, ptr %62, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %59, ptr %63, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %60, ptr %64, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %61, ptr %65, align 4, !alias.scope !8, !noalias !5
  %index.next.2 = or disjoint i64 %index, 96
  %66 = getelementptr inbounds nuw [4 x i8], ptr %3, i64 %index.next.2
  %67 = getelementptr inbounds nuw i8, ptr %66, i64 32
  %68 = getelementptr inbounds nuw i8, ptr %66, i64 64
  %69 = getelementptr inbounds nuw i8, ptr %66, i64 96
  %wide.load.3 = load <8 x i32>, ptr %66, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load1.3 = load <8 x i32>, ptr %67, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load2.3 = load <8 x i32>, ptr %68, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %wide.load3.3 = load <8 x i32>, ptr %69, align 4, !invariant.load !3, !alias.scope !5, !noalias !8
  %70 = lshr <8 x i32> %wide.load.3, splat (i32 18)
  %71 = lshr <8 x i32> %wide.load1.3, splat (i32 18)
  %72 = lshr <8 x i32> %wide.load2.3, splat (i32 18)
  %73 = lshr <8 x i32> %wide.load3.3, splat (i32 18)
  %74 = and <8 x i32> %70, splat (i32 8192)
  %75 = and <8 x i32> %71, splat (i32 8192)
  %76 = and <8 x i32> %72, splat (i32 8192)
  %77 = and <8 x i32> %73, splat (i32 8192)
  %78 = add <8 x i32> %74, %wide.load.3
  %79 = add <8 x i32> %75, %wide.load1.3
  %80 = add <8 x i32> %76, %wide.load2.3
  %81 = add <8 x i32> %77, %wide.load3.3
  %82 = getelementptr inbounds nuw [4 x i8], ptr %5, i64 %index.next.2
  %83 = getelementptr inbounds nuw i8, ptr %82, i64 32
  %84 = getelementptr inbounds nuw i8, ptr %82, i64 64
  %85 = getelementptr inbounds nuw i8, ptr %82, i64 96
  store <8 x i32> %78, ptr %82, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %79, ptr %83, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %80, ptr %84, align 4, !alias.scope !8, !noalias !5
  store <8 x i32> %81, ptr %85, align 4, !alias.scope !8, !noalias !5
  %index.next.3 = add nuw nsw i64 %index, 128
  %86 = icmp eq i64 %index.next.3, 16384
  br i1 %86, label %select_bitcast_fusion_wrapped.exit, label %vector.body, !llvm.loop !10

select_bitcast_fusion_wrapped.exit:               ; preds = %vector.body
  ret ptr null
}

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(inaccessiblemem: readwrite)
declare void @llvm.experimental.noalias.scope.decl(metadata) #1

attributes #0 = { nofree norecurse nosync nounwind memory(readwrite, target_mem: none) uwtable "frame-pointer"="all" "prefer-vector-width"="256" }
attributes #1 = { mustprogress nocallback nofree nosync nounwind willreturn memory(inaccessiblemem: readwrite) }

!llvm.module.flags = !{!0, !1}
!xla_cpu_memory_region_name = !{!2}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 1}
!2 = !{!"xla_cpu_emitter__loop_fusion_kernel_emitter__hlo_opcode__fusion"}
!3 = !{}
!4 = !{i64 65536}
!5 = !{!6}
!6 = distinct !{!6, !7, !"select_bitcast_fusion_wrapped: argument 0"}
!7 = distinct !{!7, !"select_bitcast_fusion_wrapped"}
!8 = !{!9}
!9 = distinct !{!9, !7, !"select_bitcast_fusion_wrapped: argument 1"}
!10 = distinct !{!10, !11, !12}
!11 = !{!"llvm.loop.isvectorized", i32 1}
!12 = !{!"llvm.loop.unroll.runtime.disable"}
