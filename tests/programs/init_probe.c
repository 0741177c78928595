/* Test program (plain C, so the public header is proven to compile as C): initialises from the
 * environment or from argv, prints one line describing the communicator, and can misbehave on
 * request so tests can watch the launcher and the bootstrap react.
 *
 * usage: init_probe [--init METHOD NRANKS RANK] [--exit-code N] [--sleep S] [--signal SIG]
 *                   [--split COLOR KEY] [--twice] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ouro/ouro.h"

static int check(ouroResult_t rc, const char* what) {
  if (rc == ouroSuccess) return 0;
  fprintf(stderr, "init_probe: %s failed: %s: %s\n", what, ouroGetErrorString(rc), ouroGetLastError(NULL));
  exit(10 + (int)rc);
}

static void describe(ouroComm_t comm, const char* label) {
  int rank = -1, size = -1, local_rank = -1, local_count = -1;
  check(ouroCommUserRank(comm, &rank), "ouroCommUserRank");
  check(ouroCommCount(comm, &size), "ouroCommCount");
  check(ouroCommLocalRank(comm, &local_rank), "ouroCommLocalRank");
  check(ouroCommLocalCount(comm, &local_count), "ouroCommLocalCount");
  printf("%s rank=%d size=%d local_rank=%d local_count=%d\n", label, rank, size, local_rank, local_count);
  fflush(stdout);
}

int main(int argc, char** argv) {
  const char* init = NULL;
  int nranks = 0, rank = 0, exit_code = 0, sig = 0, split = 0, color = 0, key = 0, twice = 0;
  double sleep_s = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--init") && i + 3 < argc) {
      init = argv[i + 1];
      nranks = atoi(argv[i + 2]);
      rank = atoi(argv[i + 3]);
      i += 3;
    } else if (!strcmp(argv[i], "--exit-code") && i + 1 < argc) {
      exit_code = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--sleep") && i + 1 < argc) {
      sleep_s = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--signal") && i + 1 < argc) {
      sig = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--split") && i + 2 < argc) {
      split = 1;
      color = atoi(argv[i + 1]);
      key = atoi(argv[i + 2]);
      i += 2;
    } else if (!strcmp(argv[i], "--twice")) {
      twice = 1;
    } else {
      fprintf(stderr, "init_probe: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  ouroComm_t comm = NULL;
  if (init)
    check(ouroCommInitRank(&comm, nranks, rank, init), "ouroCommInitRank");
  else
    check(ouroCommInitFromEnv(&comm), "ouroCommInitFromEnv");
  describe(comm, "world");
  if (twice) {
    ouroComm_t again = NULL;
    if (init)
      check(ouroCommInitRank(&again, nranks, rank, init), "second ouroCommInitRank");
    else
      check(ouroCommInitFromEnv(&again), "second ouroCommInitFromEnv");
    describe(again, "second");
    check(ouroCommDestroy(again), "ouroCommDestroy(second)");
  }
  if (split) {
    ouroComm_t sub = NULL;
    check(ouroCommSplit(comm, color, key, &sub), "ouroCommSplit");
    if (sub) {
      describe(sub, "split");
      check(ouroCommDestroy(sub), "ouroCommDestroy(split)");
    } else {
      printf("split none\n");
    }
  }
  if (sleep_s > 0) usleep((useconds_t)(sleep_s * 1e6));
  if (sig) raise(sig);
  check(ouroCommDestroy(comm), "ouroCommDestroy");
  /* Using a destroyed communicator is a clear error, not a crash. */
  int count = 0;
  if (ouroCommCount(comm, &count) != ouroInvalidUsage) {
    fprintf(stderr, "init_probe: ouroCommCount after destroy did not fail with ouroInvalidUsage\n");
    return 3;
  }
  return exit_code;
}
