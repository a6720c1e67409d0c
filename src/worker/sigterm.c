/*
 * sigterm.c
 *		SIGTERM for the fetcher and the apply workers: die(), as any backend,
 *		remembering who sent it.  The postmaster sends it at a shutdown; a
 *		handler that terminates its own backend sends it from this very
 *		process (that one is the job's fault: applier_guard.c); anyone else
 *		is an administrator (pg_terminate_backend, a tool that ends a
 *		database's sessions).  A process an administrator ended exits as
 *		WI_EXIT_TERMINATED, which the launcher restarts at once, without the
 *		back-off of a crash loop.
 *
 * IDENTIFICATION
 *		src/worker/sigterm.c
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"

#include "webhook_ingest.h"
#include "shmem.h"
#include "sigterm.h"

static volatile sig_atomic_t sender = 0;

static void
handle_sigterm(int signo, siginfo_t *info, void *context)
{
	sender = (info != NULL && info->si_pid > 0) ? info->si_pid : -1;
	die(signo);
}

/* On exit: ended by an administrator, unless the exit has a reason already. */
static void
note_termination(int code, Datum arg)
{
	if (sender > 0 && sender != PostmasterPid && sender != MyProcPid &&
		wi_shmem_exit_reason() == WI_EXIT_UNEXPECTED)
		wi_shmem_set_exit_reason(WI_EXIT_TERMINATED, "terminated by an administrator");
}

/* After the process has its slot (its exit reason is written there). */
void
wi_catch_sigterm(void)
{
	struct sigaction act;

	memset(&act, 0, sizeof(act));
	act.sa_sigaction = handle_sigterm;
	act.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&act.sa_mask);
	if (sigaction(SIGTERM, &act, NULL) != 0)
		pqsignal(SIGTERM, die);
	before_shmem_exit(note_termination, (Datum) 0);
}

/* Who sent SIGTERM: 0 nobody, -1 unknown. */
pid_t
wi_sigterm_sender(void)
{
	return sender;
}
