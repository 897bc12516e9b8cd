// Package farm holds the real-scheduler test suite: master launch, stop
// escalation and pools against a real single-node Slurm (sbatch, squeue,
// scancel as root on this machine). The tests skip unless SP_SLURM=1;
// `make test-slurm` (scripts/test-slurm.sh) brings Slurm up with
// scripts/slurm-up.sh, sets it, runs them and takes Slurm down again.
// Under CI (CI=true) with SP_SLURM=1 a missing or broken Slurm fails.
package farm
