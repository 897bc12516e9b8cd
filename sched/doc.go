// Package sched drives the batch schedulers a farm runs: Slurm (sbatch,
// squeue, sacct, scancel), Grid Engine (qsub, qstat, qacct, qdel), LSF
// (bsub, bjobs, bkill), and a local detached process for machines without
// one. Each driver builds the command lines and parses the scheduler's own
// view of a job into a [Job]; [RunCommand] executes them. Slurm, Grid
// Engine and LSF also submit job arrays ([ArrayDriver]: one submission,
// one element per session), whose elements are queried and cancelled by
// their element ids; [SharedExec] lets many waiters share one query.
//
// The package knows nothing about sessions: launch.Launch (package launch) writes the job
// script and records the job in state/launch.json (PROTOCOL.md, "Launch").
//
// Command lines and parsers are pure functions so they can be unit-tested
// without the scheduler. Slurm and Grid Engine are also tested for real
// (make test-slurm, make test-sge: package farm); LSF only through its
// command lines, sample outputs and a fake bsub/bjobs/bkill (see
// docs/farms.md).
package sched
