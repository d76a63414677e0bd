; ModuleID = '__compute_module_broadcast_select_fusion_kernel_module'
source_filename = "__compute_module_broadcast_select_fusion_kernel_module"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; Function Attrs: nofree norecurse nosync nounwind memory(readwrite, target_mem: none) uwtable
define noalias noundef ptr @broadcast_select_fusion(ptr nofree readonly captures(none) %0) local_unnamed_addr #0 {
  %2 = getelementptr inbounds nuw i8, ptr %0, i64 24
  %3 = load ptr, ptr %2, align 8, !invariant.load !3
  %4 = load ptr, ptr %3, align 8, !invariant.load !3, !dereferenceable !4
  %5 = getelementptr inbounds nuw i8, ptr %0, i64 8
  %6 = load ptr, ptr %5, align 8
  %7 = load i64, ptr %6, align 4, !invariant.load !3
  tail call void @llvm.experimental.noalias.scope.decl(metadata !5)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !8)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !10)
  %8 = icmp ult i64 %7, 2
  br i1 %8, label %.preheader, label %broadcast_select_fusion_wrapped.exit

.preheader:                                       ; preds = %1
  %9 = getelementptr inbounds nuw i8, ptr %3, i64 32
  %10 = load ptr, ptr %9, align 8, !invariant.load !3, !dereferenceable !12
  %11 = getelementptr inbounds nuw i8, ptr %3, i64 16
  %12 = load ptr, ptr %11, align 8, !invariant.load !3, !dereferenceable !13
  %.idx = shl nuw nsw i64 %7, 15
  %13 = getelementptr i8, ptr %12, i64 %.idx
  %.idx1 = shl nuw nsw i64 %7, 20
  %14 = getelementptr i8, ptr %10, i64 %.idx1
  br label %15

15:                                               ; preds = %.preheader, %.split5.us
  %16 = phi i64 [ 0, %.preheader ], [ %119, %.split5.us ]
  %17 = getelementptr [4 x i8], ptr %13, i64 %16
  %18 = load i32, ptr %17, align 4, !invariant.load !3, !alias.scope !8, !noalias !14
  %19 = lshr i32 %18, 18
  %20 = and i32 %19, 8192
  %21 = add i32 %20, %18
  %.fr6 = freeze i32 %21
  %22 = icmp ult i32 %.fr6, 8192
  %.idx2 = shl nuw nsw i64 %16, 7
  %23 = getelementptr i8, ptr %14, i64 %.idx2
  br i1 %22, label %.split.us.preheader, label %.split.preheader

.split.preheader:                                 ; preds = %15
  store float +qnan, ptr %23, align 4, !alias.scope !10, !noalias !15
  %24 = getelementptr i8, ptr %23, i64 4
  store float +qnan, ptr %24, align 4, !alias.scope !10, !noalias !15
  %25 = getelementptr i8, ptr %23, i64 8
  store float +qnan, ptr %25, align 4, !alias.scope !10, !noalias !15
  %26 = getelementptr i8, ptr %23, i64 12
  store float +qnan, ptr %26, align 4, !alias.scope !10, !noalias !15
  %27 = getelementptr i8, ptr %23, i64 16
  store float +qnan, ptr %27, align 4, !alias.scope !10, !noalias !15
  %28 = getelementptr i8, ptr %23, i64 20
  store float +qnan, ptr %28, align 4, !alias.scope !10, !noalias !15
  %29 = getelementptr i8, ptr %23, i64 24
  store float +qnan, ptr %29, align 4, !alias.scope !10, !noalias !15
  %30 = getelementptr i8, ptr %23, i64 28
  store float +qnan, ptr %30, align 4, !alias.scope !10, !noalias !15
  %31 = getelementptr i8, ptr %23, i64 32
  store float +qnan, ptr %31, align 4, !alias.scope !10, !noalias !15
  %32 = getelementptr i8, ptr %23, i64 36
  store float +qnan, ptr %32, align 4, !alias.scope !10, !noalias !15
  %33 = getelementptr i8, ptr %23, i64 40
  store float +qnan, ptr %33, align 4, !alias.scope !10, !noalias !15
  %34 = getelementptr i8, ptr %23, i64 44
  store float +qnan, ptr %34, align 4, !alias.scope !10, !noalias !15
  %35 = getelementptr i8, ptr %23, i64 48
  store float +qnan, ptr %35, align 4, !alias.scope !10, !noalias !15
  %36 = getelementptr i8, ptr %23, i64 52
  store float +qnan, ptr %36, align 4, !alias.scope !10, !noalias !15
  %37 = getelementptr i8, ptr %23, i64 56
  store float +qnan, ptr %37, align 4, !alias.scope !10, !noalias !15
  %38 = getelementptr i8, ptr %23, i64 60
  store float +qnan, ptr %38, align 4, !alias.scope !10, !noalias !15
  %39 = getelementptr i8, ptr %23, i64 64
  store float +qnan, ptr %39, align 4, !alias.scope !10, !noalias !15
  %40 = getelementptr i8, ptr %23, i64 68
  store float +qnan, ptr %40, align 4, !alias.scope !10, !noalias !15
  %41 = getelementptr i8, ptr %23, i64 72
  store float +qnan, ptr %41, align 4, !alias.scope !10, !noalias !15
  %42 = getelementptr i8, ptr %23, i64 76
  store float +qnan, ptr %42, align 4, !alias.scope !10, !noalias !15
  %43 = getelementptr i8, ptr %23, i64 80
  store float +qnan, ptr %43, align 4, !alias.scope !10, !noalias !15
  %44 = getelementptr i8, ptr %23, i64 84
  store float +qnan, ptr %44, align 4, !alias.scope !10, !noalias !15
  %45 = getelementptr i8, ptr %23, i64 88
  store float +qnan, ptr %45, align 4, !alias.scope !10, !noalias !15
  %46 = getelementptr i8, ptr %23, i64 92
  store float +qnan, ptr %46, align 4, !alias.scope !10, !noalias !15
  %47 = getelementptr i8, ptr %23, i64 96
  store float +qnan, ptr %47, align 4, !alias.scope !10, !noalias !15
  %48 = getelementptr i8, ptr %23, i64 100
  store float +qnan, ptr %48, align 4, !alias.scope !10, !noalias !15
  %49 = getelementptr i8, ptr %23, i64 104
  store float +qnan, ptr %49, align 4, !alias.scope !10, !noalias !15
  %50 = getelementptr i8, ptr %23, i64 108
  store float +qnan, ptr %50, align 4, !alias.scope !10, !noalias !15
  %51 = getelementptr i8, ptr %23, i64 112
  store float +qnan, ptr %51, align 4, !alias.scope !10, !noalias !15
  %52 = getelementptr i8, ptr %23, i64 116
  store float +qnan, ptr %52, align 4, !alias.scope !10, !noalias !15
  %53 = getelementptr i8, ptr %23, i64 120
  store float +qnan, ptr %53, align 4, !alias.scope !10, !noalias !15
  br label %.split5.us

.split.us.preheader:                              ; preds = %15
  %54 = shl nuw nsw i32 %.fr6, 5
  %55 = zext nneg i32 %54 to i64
  %invariant.gep = getelementptr [4 x i8], ptr %4, i64 %55
  %56 = load float, ptr %invariant.gep, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  store float %56, ptr %23, align 4, !alias.scope !10, !noalias !15
  %gep.us.1 = getelementptr i8, ptr %invariant.gep, i64 4
  %57 = load float, ptr %gep.us.1, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %58 = getelementptr i8, ptr %23, i64 4
  store float %57, ptr %58, align 4, !alias.scope !10, !noalias !15
  %gep.us.2 = getelementptr i8, ptr %invariant.gep, i64 8
  %59 = load float, ptr %gep.us.2, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %60 = getelementptr i8, ptr %23, i64 8
  store float %59, ptr %60, align 4, !alias.scope !10, !noalias !15
  %gep.us.3 = getelementptr i8, ptr %invariant.gep, i64 12
  %61 = load float, ptr %gep.us.3, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %62 = getelementptr i8, ptr %23, i64 12
  store float %61, ptr %62, align 4, !alias.scope !10, !noalias !15
  %gep.us.4 = getelementptr i8, ptr %invariant.gep, i64 16
  %63 = load float, ptr %gep.us.4, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %64 = getelementptr i8, ptr %23, i64 16
  store float %63, ptr %64, align 4, !alias.scope !10, !noalias !15
  %gep.us.5 = getelementptr i8, ptr %invariant.gep, i64 20
  %65 = load float, ptr %gep.us.5, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %66 = getelementptr i8, ptr %23, i64 20
  store float %65, ptr %66, align 4, !alias.scope !10, !noalias !15
  %gep.us.6 = getelementptr i8, ptr %invariant.gep, i64 24
  %67 = load float, ptr %gep.us.6, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %68 = getelementptr i8, ptr %23, i64 24
  store float %67, ptr %68, align 4, !alias.scope !10, !noalias !15
  %gep.us.7 = getelementptr i8, ptr %invariant.gep, i64 28
  %69 = load float, ptr %gep.us.7, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %70 = getelementptr i8, ptr %23, i64 28
  store float %69, ptr %70, align 4, !alias.scope !10, !noalias !15
  %gep.us.8 = getelementptr i8, ptr %invariant.gep, i64 32
  %71 = load float, ptr %gep.us.8, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %72 = getelementptr i8, ptr %23, i64 32
  store float %71, ptr %72, align 4, !alias.scope !10, !noalias !15
  %gep.us.9 = getelementptr i8, ptr %invariant.gep, i64 36
  %73 = load float, ptr %gep.us.9, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %74 = getelementptr i8, ptr %23, i64 36
  store float %73, ptr %74, align 4, !alias.scope !10, !noalias !15
  %gep.us.10 = getelementptr i8, ptr %invariant.gep, i64 40
  %75 = load float, ptr %gep.us.10, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %76 = getelementptr i8, ptr %23, i64 40
  store float %75, ptr %76, align 4, !alias.scope !10, !noalias !15
  %gep.us.11 = getelementptr i8, ptr %invariant.gep, i64 44
  %77 = load float, ptr %gep.us.11, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %78 = getelementptr i8, ptr %23, i64 44
  store float %77, ptr %78, align 4, !alias.scope !10, !noalias !15
  %gep.us.12 = getelementptr i8, ptr %invariant.gep, i64 48
  %79 = load float, ptr %gep.us.12, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %80 = getelementptr i8, ptr %23, i64 48
  store float %79, ptr %80, align 4, !alias.scope !10, !noalias !15
  %gep.us.13 = getelementptr i8, ptr %invariant.gep, i64 52
  %81 = load float, ptr %gep.us.13, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %82 = getelementptr i8, ptr %23, i64 52
  store float %81, ptr %82, align 4, !alias.scope !10, !noalias !15
  %gep.us.14 = getelementptr i8, ptr %invariant.gep, i64 56
  %83 = load float, ptr %gep.us.14, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %84 = getelementptr i8, ptr %23, i64 56
  store float %83, ptr %84, align 4, !alias.scope !10, !noalias !15
  %gep.us.15 = getelementptr i8, ptr %invariant.gep, i64 60
  %85 = load float, ptr %gep.us.15, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %86 = getelementptr i8, ptr %23, i64 60
  store float %85, ptr %86, align 4, !alias.scope !10, !noalias !15
  %gep.us.16 = getelementptr i8, ptr %invariant.gep, i64 64
  %87 = load float, ptr %gep.us.16, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %88 = getelementptr i8, ptr %23, i64 64
  store float %87, ptr %88, align 4, !alias.scope !10, !noalias !15
  %gep.us.17 = getelementptr i8, ptr %invariant.gep, i64 68
  %89 = load float, ptr %gep.us.17, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %90 = getelementptr i8, ptr %23, i64 68
  store float %89, ptr %90, align 4, !alias.scope !10, !noalias !15
  %gep.us.18 = getelementptr i8, ptr %invariant.gep, i64 72
  %91 = load float, ptr %gep.us.18, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %92 = getelementptr i8, ptr %23, i64 72
  store float %91, ptr %92, align 4, !alias.scope !10, !noalias !15
  %gep.us.19 = getelementptr i8, ptr %invariant.gep, i64 76
  %93 = load float, ptr %gep.us.19, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %94 = getelementptr i8, ptr %23, i64 76
  store float %93, ptr %94, align 4, !alias.scope !10, !noalias !15
  %gep.us.20 = getelementptr i8, ptr %invariant.gep, i64 80
  %95 = load float, ptr %gep.us.20, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %96 = getelementptr i8, ptr %23, i64 80
  store float %95, ptr %96, align 4, !alias.scope !10, !noalias !15
  %gep.us.21 = getelementptr i8, ptr %invariant.gep, i64 84
  %97 = load float, ptr %gep.us.21, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %98 = getelementptr i8, ptr %23, i64 84
  store float %97, ptr %98, align 4, !alias.scope !10, !noalias !15
  %gep.us.22 = getelementptr i8, ptr %invariant.gep, i64 88
  %99 = load float, ptr %gep.us.22, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %100 = getelementptr i8, ptr %23, i64 88
  store float %99, ptr %100, align 4, !alias.scope !10, !noalias !15
  %gep.us.23 = getelementptr i8, ptr %invariant.gep, i64 92
  %101 = load float, ptr %gep.us.23, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %102 = getelementptr i8, ptr %23, i64 92
  store float %101, ptr %102, align 4, !alias.scope !10, !noalias !15
  %gep.us.24 = getelementptr i8, ptr %invariant.gep, i64 96
  %103 = load float, ptr %gep.us.24, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %104 = getelementptr i8, ptr %23, i64 96
  store float %103, ptr %104, align 4, !alias.scope !10, !noalias !15
  %gep.us.25 = getelementptr i8, ptr %invariant.gep, i64 100
  %105 = load float, ptr %gep.us.25, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %106 = getelementptr i8, ptr %23, i64 100
  store float %105, ptr %106, align 4, !alias.scope !10, !noalias !15
  %gep.us.26 = getelementptr i8, ptr %invariant.gep, i64 104
  %107 = load float, ptr %gep.us.26, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %108 = getelementptr i8, ptr %23, i64 104
  store float %107, ptr %108, align 4, !alias.scope !10, !noalias !15
  %gep.us.27 = getelementptr i8, ptr %invariant.gep, i64 108
  %109 = load float, ptr %gep.us.27, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %110 = getelementptr i8, ptr %23, i64 108
  store float %109, ptr %110, align 4, !alias.scope !10, !noalias !15
  %gep.us.28 = getelementptr i8, ptr %invariant.gep, i64 112
  %111 = load float, ptr %gep.us.28, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %112 = getelementptr i8, ptr %23, i64 112
  store float %111, ptr %112, align 4, !alias.scope !10, !noalias !15
  %gep.us.29 = getelementptr i8, ptr %invariant.gep, i64 116
  %113 = load float, ptr %gep.us.29, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %114 = getelementptr i8, ptr %23, i64 116
  store float %113, ptr %114, align 4, !alias.scope !10, !noalias !15
  %gep.us.30 = getelementptr i8, ptr %invariant.gep, i64 120
  %115 = load float, ptr %gep.us.30, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  %116 = getelementptr i8, ptr %23, i64 120
  store float %115, ptr %116, align 4, !alias.scope !10, !noalias !15
  %gep.us.31 = getelementptr i8, ptr %invariant.gep, i64 124
  %117 = load float, ptr %gep.us.31, align 4, !invariant.load !3, !alias.scope !5, !noalias !16
  br label %.split5.us

.split5.us:                                       ; preds = %.split.preheader, %.split.us.preheader
  %.sink = phi float [ +qnan, %.split.preheader ], [ %117, %.split.us.preheader ]
  %118 = getelementptr i8, ptr %23, i64 124
  store float %.sink, ptr %118, align 4, !alias.scope !10, !noalias !15
  %119 = add nuw nsw i64 %16, 1
  %exitcond.not = icmp eq i64 %119, 8192
  br i1 %exitcond.not, label %broadcast_select_fusion_wrapped.exit, label %15, !llvm.loop !17

broadcast_select_fusion_wrapped.exit:             ; preds = %.split5.us, %1
  ret ptr null
}

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(inaccessiblemem: readwrite)
declare void @llvm.experimental.noalias.scope.decl(metadata) #1

attributes #0 = { nofree norecurse nosync nounwind memory(readwrite, target_mem: none) uwtable "frame-pointer"="all" "prefer-vector-width"="256" }
attributes #1 = { mustprogress nocallback nofree nosync nounwind willreturn memory(inaccessiblemem: readwrite) }

!llvm.module.flags = !{!0, !1}
!xla_cpu_memory_region_name = !{!2}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 0}
!2 = !{!"xla_cpu_emitter__loop_fusion_kernel_emitter__hlo_opcode__fusion"}
!3 = !{}
!4 = !{i64 1048576}
!5 = !{!6}
!6 = distinct !{!6, !7, !"broadcast_select_fusion_wrapped: argument 0"}
!7 = distinct !{!7, !"broadcast_select_fusion_wrapped"}
!8 = !{!9}
!9 = distinct !{!9, !7, !"broadcast_select_fusion_wrapped: argument 1"}
!10 = !{!11}
!11 = distinct !{!11, !7, !"broadcast_select_fusion_wrapped: argument 2"}
!12 = !{i64 2097152}
!13 = !{i64 65536}
!14 = !{!6, !11}
!15 = !{!6, !9}
!16 = !{!9, !11}
!17 = distinct !{!17, !18}
!18 = !{!"llvm.loop.unroll.disable"}
