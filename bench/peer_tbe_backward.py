# The TorchRec Triton TBE backward + exact optimizer (the FBTriton kernels: short-run and long-run
# accumulate, then apply) with the transpose hoisted out of the timed region, on the inputs
# `tbe-bench forward --dump-npy DIR` wrote, timed as tbe-bench times (bench/peer_timing.py). The
# counterpart of `tbe-bench backward`'s ".hoisted" rows (the same named workload and batch size
# draw the same lookups in both commands: tbe::generate). Any table shapes: mixed-D workloads
# (prod-mixed) too, with the dump's feature_table_map (peer_tbe_forward.table_specs).
# Timed per optimizer (EXACT_SGD, EXACT_ROWWISE_ADAGRAD) and weights type (FP32, FP16; FP32
# optimizer state): TritonTBE.backward(ctx, grad_output) with ctx holding the transpose's sorted
# runs (computed once, untimed, by the stand-in of peer_tbe_triton.py, as the peer does when its
# hoist_transpose_to_forward flag moves the transpose into the forward). grad_output [B, total D]
# is drawn here (uniform in [-1e-3, 1e-3)): the timing does not depend on its values.
#
# Usage (device): python3 bench/peer_tbe_backward.py DIR [--iters N] [--weights fp32|fp16]...
#                 [--json FILE]
# Needs the unmodified TorchRec copies in .peers/ (git-ignored, never committed; PEER_COPIES
# overrides) and the shared stand-ins of peer_tbe_triton.py (PEER_TOOLS, default .peers/tools).

import torch

import peer_tbe_forward as fwd  # puts PEER_TOOLS on sys.path; the dump and the peer module
from peer_timing import l2_flush_buffer, time_cuda

P = fwd.P
dev = torch.device("cuda")


def main():
    args = fwd.peer_arg_parser("timed iterations").parse_args()
    tt = fwd.import_peer()
    ops = torch.ops.fbgemm
    setattr(ops, "get_infos_metadata", P.get_infos_metadata)
    setattr(ops, "transpose_embedding_input", P.transpose_embedding_input)
    EOT = P.EmbOptimType
    dump = fwd.Dump(args.dump)
    idx, off = dump.idx, dump.off
    B = dump.meta["B"]
    res = dump.results_header()
    flush = l2_flush_buffer()
    for wname in args.weights or list(fwd.WEIGHT_DTYPES):
        tbe = dump.make_tbe(tt, fwd.WEIGHT_DTYPES[wname], EOT.EXACT_ROWWISE_ADAGRAD)
        w_init = tbe.weight.data.clone()
        # the 32-bit info word (feature << bits) | b: FBGEMM's split for this B and T (26 bits
        # for b up to 63 features, fewer above: prod-mixed's 66 features take 25)
        bits, mask = P.get_infos_metadata(None, B, tbe.T)
        tr = P.transpose_embedding_input(tbe.hash_size_cumsum, tbe.total_hash_size_bits, idx, off,
                                         info_B_num_bits=bits, info_B_mask=mask)
        g = torch.Generator(device=dev)
        g.manual_seed(1)
        dout = (torch.rand(B, tbe.total_embedding_dim, device=dev, generator=g) * 2 - 1) * 1e-3
        for oname in ["EXACT_SGD", "EXACT_ROWWISE_ADAGRAD"]:
            ctx = P.Ctx()
            ctx.needs_input_grad = (False,) * 48
            tt.TritonTBE.forward(
                ctx, indices=idx, offsets=off, weight=tbe.weight.data,
                table_offsets=tbe.table_offsets, embedding_dims=tbe.embedding_dims,
                embedding_offsets=tbe.embedding_offsets, feature_table_map=tbe.feature_table_map_tensor,
                total_embedding_dim=tbe.total_embedding_dim, T=tbe.T,
                hash_size_cumsum=tbe.hash_size_cumsum, total_hash_size_bits=tbe.total_hash_size_bits,
                learning_rate=0.01, block_size=tbe.block_size, eps=1e-8, optimizer=EOT[oname],
                momentum=tbe.momentum, rows_cumsum=tbe.rows_cumsum, per_sample_weights=None,
                forward_event_callback=None, output_dtype=torch.float32, stochastic_rounding=False,
                hoist_transpose_to_forward=False)
            ctx.hoist_transpose_to_forward = True
            ctx.bwd_info_B_num_bits, ctx.bwd_info_B_mask = bits, mask
            (ctx.bwd_linear_indices, _, ctx.bwd_infos_sorted, ctx.bwd_sorted_linear_indices_run, _,
             ctx.bwd_sorted_linear_indices_num_runs,
             ctx.bwd_sorted_linear_indices_cumulative_run_lengths) = tr
            med, lo, hi = time_cuda(lambda: tt.TritonTBE.backward(ctx, dout), args.iters, flush)
            tbe.weight.data.copy_(w_init)
            tbe.momentum.zero_()
            key = f"{wname}.{'sgd' if oname == 'EXACT_SGD' else 'adagrad'}.hoisted"
            res["results"][key] = {"median_ms": med, "min_ms": lo, "max_ms": hi, "iters": args.iters}
            print(f"peer triton bwd {key}: median {med:.3f} ms (min {lo:.3f}, max {hi:.3f})", flush=True)
        del tbe, tr, dout, w_init
        torch.cuda.empty_cache()
    fwd.write_json(args.json, res)


if __name__ == "__main__":
    main()
