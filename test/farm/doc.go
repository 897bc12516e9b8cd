// Package farm holds the real-scheduler test suite: master launch, stop
// escalation and pools against a real single-node Slurm (sbatch, squeue,
// scancel) and a real single-node Grid Engine (qsub, qstat, qdel), as root
// on this machine. The Slurm tests run only with SP_SLURM=1 and the Grid
// Engine tests only with SP_SGE=1: `make test-slurm` (scripts/test-slurm.sh)
// and `make test-sge` (scripts/test-sge.sh) bring the scheduler up
// (scripts/slurm-up.sh, scripts/sge-up.sh), set the variable, run them and
// take the scheduler down again. With the variable set, a missing or broken
// scheduler fails the suite (under CI and locally); without it the suite is
// not requested and says so. SP_LOCAL=1 runs the scale test with the local
// launcher instead (TestLocalPool128: no scheduler, no root).
package farm
