; ModuleID = '__compute_module___compute_module_wrapped_convert'
source_filename = "__compute_module___compute_module_wrapped_convert"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

define noalias noundef ptr @wrapped_convert(ptr readonly captures(none) %0) local_unnamed_addr {
  %2 = getelementptr inbounds nuw i8, ptr %0, i64 24
  %3 = load ptr, ptr %2, align 8, !invariant.load !8
  %4 = load ptr, ptr %3, align 8, !invariant.load !8
  %5 = getelementptr inbounds nuw i8, ptr %3, i64 16
  %6 = load ptr, ptr %5, align 8, !invariant.load !8
  %7 = getelementptr inbounds nuw i8, ptr %0, i64 8
  %8 = load ptr, ptr %7, align 8
  %9 = load i64, ptr %8, align 4, !invariant.load !8
  %.not = icmp sgt i64 %9, 1
  br i1 %.not, label %._crit_edge, label %.lr.ph.preheader

.lr.ph.preheader:                                 ; preds = %1
  %10 = tail call i64 @llvm.smax.i64(i64 %9, i64 0)
  %11 = shl i64 %10, 12
  %12 = tail call i64 @llvm.umin.i64(i64 %11, i64 4096)
  %13 = tail call i64 @llvm.umin.i64(i64 %11, i64 8192)
  %14 = or disjoint i64 %12, 4095
  br label %.lr.ph

.lr.ph:                                           ; preds = %.lr.ph.preheader, %.lr.ph
  %15 = phi i64 [ %66, %.lr.ph ], [ %13, %.lr.ph.preheader ]
  %savedstack = tail call ptr @llvm.stacksave.p0()
  %.idx1 = shl nuw nsw i64 %15, 7
  %16 = getelementptr i8, ptr %4, i64 %.idx1
  %.sroa.0.0.copyload = load <8 x float>, ptr %16, align 1
  %.sroa.4.0..sroa_idx = getelementptr inbounds nuw i8, ptr %16, i64 32
  %.sroa.4.0.copyload = load <8 x float>, ptr %.sroa.4.0..sroa_idx, align 1
  %.sroa.5.0..sroa_idx = getelementptr inbounds nuw i8, ptr %16, i64 64
  %.sroa.5.0.copyload = load <8 x float>, ptr %.sroa.5.0..sroa_idx, align 1
  %.sroa.6.0..sroa_idx = getelementptr inbounds nuw i8, ptr %16, i64 96
  %.sroa.6.0.copyload = load <8 x float>, ptr %.sroa.6.0..sroa_idx, align 1
  %17 = alloca [32 x bfloat], align 64
  %18 = bitcast <8 x float> %.sroa.0.0.copyload to <8 x i32>
  %19 = lshr <8 x i32> %18, splat (i32 16)
  %20 = and <8 x i32> %19, splat (i32 1)
  %21 = add nuw nsw <8 x i32> %20, splat (i32 32767)
  %22 = fcmp uno <8 x float> %.sroa.0.0.copyload, zeroinitializer
  %23 = and <8 x i32> %18, splat (i32 -8388608)
  %24 = or disjoint <8 x i32> %23, splat (i32 4194304)
  %25 = add <8 x i32> %21, %18
  %26 = select <8 x i1> %22, <8 x i32> %24, <8 x i32> %25
  %27 = lshr <8 x i32> %26, splat (i32 16)
  %28 = trunc nuw <8 x i32> %27 to <8 x i16>
  store <8 x i16> %28, ptr %17, align 64
  %29 = bitcast <8 x float> %.sroa.4.0.copyload to <8 x i32>
  %30 = lshr <8 x i32> %29, splat (i32 16)
  %31 = and <8 x i32> %30, splat (i32 1)
  %32 = add nuw nsw <8 x i32> %31, splat (i32 32767)
  %33 = fcmp uno <8 x float> %.sroa.4.0.copyload, zeroinitializer
  %34 = and <8 x i32> %29, splat (i32 -8388608)
  %35 = or disjoint <8 x i32> %34, splat (i32 4194304)
  %36 = add <8 x i32> %32, %29
  %37 = select <8 x i1> %33, <8 x i32> %35, <8 x i32> %36
  %38 = lshr <8 x i32> %37, splat (i32 16)
  %39 = trunc nuw <8 x i32> %38 to <8 x i16>
  %40 = getelementptr inbounds nuw i8, ptr %17, i64 16
  store <8 x i16> %39, ptr %40, align 16
  %41 = bitcast <8 x float> %.sroa.5.0.copyload to <8 x i32>
  %42 = lshr <8 x i32> %41, splat (i32 16)
  %43 = and <8 x i32> %42, splat (i32 1)
  %44 = add nuw nsw <8 x i32> %43, splat (i32 32767)
  %45 = fcmp uno <8 x float> %.sroa.5.0.copyload, zeroinitializer
  %46 = and <8 x i32> %41, splat (i32 -8388608)
  %47 = or disjoint <8 x i32> %46, splat (i32 4194304)
  %48 = add <8 x i32> %44, %41
  %49 = select <8 x i1> %45, <8 x i32> %47, <8 x i32> %48
  %50 = lshr <8 x i32> %49, splat (i32 16)
  %51 = trunc nuw <8 x i32> %50 to <8 x i16>
  %52 = getelementptr inbounds nuw i8, ptr %17, i64 32
  store <8 x i16> %51, ptr %52, align 32
  %53 = bitcast <8 x float> %.sroa.6.0.copyload to <8 x i32>
  %54 = lshr <8 x i32> %53, splat (i32 16)
  %55 = and <8 x i32> %54, splat (i32 1)
  %56 = add nuw nsw <8 x i32> %55, splat (i32 32767)
  %57 = fcmp uno <8 x float> %.sroa.6.0.copyload, zeroinitializer
  %58 = and <8 x i32> %53, splat (i32 -8388608)
  %59 = or disjoint <8 x i32> %58, splat (i32 4194304)
  %60 = add <8 x i32> %56, %53
  %61 = select <8 x i1> %57, <8 x i32> %59, <8 x i32> %60
  %62 = lshr <8 x i32> %61, splat (i32 16)
  %63 = trunc nuw <8 x i32> %62 to <8 x i16>
  %64 = getelementptr inbounds nuw i8, ptr %17, i64 48
  store <8 x i16> %63, ptr %64, align 16
  %.idx3 = shl nuw nsw i64 %15, 6
  %65 = getelementptr i8, ptr %6, i64 %.idx3
  call void @llvm.memcpy.p0.p0.i64(ptr noundef nonnull align 1 dereferenceable(64) %65, ptr noundef nonnull align 64 dereferenceable(64) %17, i64 64, i1 false)
  call void @llvm.stackrestore.p0(ptr %savedstack)
  %66 = add nuw nsw i64 %15, 1
  %exitcond.not = icmp eq i64 %15, %14
  br i1 %exitcond.not, label %._crit_edge, label %.lr.ph

._crit_edge:                                      ; preds = %.lr.ph, %1
  ret ptr null
}

; Function Attrs: mustprogress nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none)
declare i64 @llvm.smax.i64(i64, i64) #0

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(argmem: readwrite)
declare void @llvm.memcpy.p0.p0.i64(ptr noalias writeonly captures(none), ptr noalias readonly captures(none), i64, i1 immarg) #1

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn
declare ptr @llvm.stacksave.p0() #2

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn
declare void @llvm.stackrestore.p0(ptr) #2

; Function Attrs: nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none)
declare i64 @llvm.umin.i64(i64, i64) #3

attributes #0 = { mustprogress nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none) }
attributes #1 = { mustprogress nocallback nofree nosync nounwind willreturn memory(argmem: readwrite) }
attributes #2 = { mustprogress nocallback nofree nosync nounwind willreturn }
attributes #3 = { nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none) }

!llvm.module.flags = !{!0, !1, !2, !3, !4, !5}
!xla_cpu_memory_region_name = !{!6}
!llvm.ident = !{!7}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 4}
!2 = !{i32 1, !"wchar_size", i32 4}
!3 = !{i32 8, !"PIC Level", i32 0}
!4 = !{i32 7, !"uwtable", i32 2}
!5 = !{i32 7, !"frame-pointer", i32 2}
!6 = !{!"xla_cpu_emitter__tiled_emitter__hlo_opcode__fusion"}
!7 = !{!"clang version 18.1.8"}
!8 = !{}
