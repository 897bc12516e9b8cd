#!/usr/bin/env python3
# roundtrip-stats.py LOG: per run and pooled p50 of roundtrip-ab.sh output (the
# first trip of each run, which waits for the runner to be seen, is left out),
# with the steps: submit, runner pickup (submit returned -> start_ts),
# command (start_ts -> end_ts), master notices (end_ts -> wait returned).
import sys,re,statistics
runs={}; cur=None
for l in open(sys.argv[1]):
    m=re.match(r'== AB run (\d+) side (\d+)',l)
    if m: cur=(int(m.group(1)),m.group(2)); runs[cur]=[]; continue
    m=re.search(r'NFS TRIP (\d+) t0 (\d+) t1 (\d+) start (\d+) end (\d+) t2 (\d+)',l)
    if m and cur:
        i,t0,t1,st,en,t2=map(int,m.groups())
        if i==0: continue
        runs[cur].append(((t2-t0)/1000,(t1-t0)/1000,(st-t1)/1000,(en-st)/1000,(t2-en)/1000))
import collections; pooled=collections.defaultdict(list)
for k in sorted(runs):
    v=runs[k]; pooled[k[1]]+=v
    if not v: continue
    med=[statistics.median(x[j] for x in v) for j in range(5)]
    print(f"run {k[0]} side {k[1]}: n={len(v)} p50 {med[0]:.0f} ms (submit {med[1]:.0f}, pickup {med[2]:.0f}, command {med[3]:.0f}, notice {med[4]:.0f})")
for s,v in pooled.items():
    if not v: continue
    med=[statistics.median(x[j] for x in v) for j in range(5)]
    q=sorted(x[0] for x in v)
    print(f"POOLED side {s}: n={len(v)} p50 {med[0]:.0f} p90 {q[int(len(q)*.9)]:.0f} ms (submit {med[1]:.0f}, pickup {med[2]:.0f}, command {med[3]:.0f}, notice {med[4]:.0f})")
