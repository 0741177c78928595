/* Test program for the flight recorder (issue #34; plain C, so ouro/diagnostics.h is proven to
 * compile as C): a loop of small all-reduces that one rank can get wrong on request, as the hangs
 * of real jobs do.
 *
 * usage: trace_rank [--calls N] [--count C] [--interval-ms M] [--skip RANK:K] [--sleep RANK:K:S]
 *                   [--different RANK:K] [--then exit|hang|barrier] [--hang-s S] [--dump]
 *   --skip RANK:K        RANK leaves out all-reduce K (1-based)
 *   --sleep RANK:K:S     RANK computes (sleeps, one nanosleep) for S seconds before all-reduce K;
 *                        it prints "interrupted" if the sleep was cut short
 *   --different RANK:K   RANK calls a broadcast of 4 int8 where the others call all-reduce K
 *   --then               after the loop: destroy and exit (default), hang (sleep --hang-s, 60),
 *                        or a barrier
 *   --dump               print the length of ouroCommDumpTrace's document and its first bytes
 * Prints "rank R: N calls, result sum S" at the end: the same on every run with the same flags. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ouro/diagnostics.h"
#include "ouro/ouro.h"

static void check(ouroResult_t rc, const char* what) {
  if (rc == ouroSuccess) return;
  fprintf(stderr, "trace_rank: %s failed: %s: %s\n", what, ouroGetErrorString(rc), ouroGetLastError(NULL));
  fflush(stderr);
  exit(3);
}

/* One nanosleep: returns 1 when a signal cut it short. */
static int sleepOnce(double seconds) {
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  return nanosleep(&ts, NULL) != 0 && errno == EINTR;
}

static int parsePair(const char* s, int* a, int* b) { return sscanf(s, "%d:%d", a, b) == 2; }

int main(int argc, char** argv) {
  int calls = 50, count = 2, interval_ms = 0, dump = 0;
  int skip_rank = -1, skip_k = 0, sleep_rank = -1, sleep_k = 0, diff_rank = -1, diff_k = 0;
  double sleep_s = 0, hang_s = 60;
  const char* then = "exit";
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(a, "--calls")) calls = atoi(v), i++;
    else if (!strcmp(a, "--count")) count = atoi(v), i++;
    else if (!strcmp(a, "--interval-ms")) interval_ms = atoi(v), i++;
    else if (!strcmp(a, "--skip") && parsePair(v, &skip_rank, &skip_k)) i++;
    else if (!strcmp(a, "--different") && parsePair(v, &diff_rank, &diff_k)) i++;
    else if (!strcmp(a, "--sleep") && sscanf(v, "%d:%d:%lf", &sleep_rank, &sleep_k, &sleep_s) == 3) i++;
    else if (!strcmp(a, "--then")) then = v, i++;
    else if (!strcmp(a, "--hang-s")) hang_s = atof(v), i++;
    else if (!strcmp(a, "--dump")) dump = 1;
    else {
      fprintf(stderr, "trace_rank: bad argument '%s'\n", a);
      return 2;
    }
  }
  ouroComm_t comm;
  check(ouroCommInitFromEnv(&comm), "ouroCommInitFromEnv");
  int rank = 0, size = 1;
  check(ouroCommUserRank(comm, &rank), "ouroCommUserRank");
  check(ouroCommCount(comm, &size), "ouroCommCount");
  float* buf = malloc(sizeof(float) * (size_t)count);
  double total = 0;
  int made = 0;
  for (int k = 1; k <= calls; k++) {
    if (rank == sleep_rank && k == sleep_k && sleepOnce(sleep_s)) printf("rank %d: interrupted\n", rank);
    if (rank == skip_rank && k == skip_k) continue;
    for (int i = 0; i < count; i++) buf[i] = (float)(rank + 1) * (float)(k + i);
    if (rank == diff_rank && k == diff_k) {
      char bytes[4] = {0};
      check(ouroBroadcast(bytes, bytes, 4, ouroInt8, 0, comm, NULL), "ouroBroadcast");
    } else {
      check(ouroAllReduce(buf, buf, (size_t)count, ouroFloat32, ouroSum, comm, NULL), "ouroAllReduce");
    }
    for (int i = 0; i < count; i++) total += buf[i];
    made++;
    if (interval_ms > 0) sleepOnce(interval_ms / 1000.0);
  }
  if (dump) {
    size_t length = 0;
    check(ouroCommDumpTrace(comm, NULL, 0, &length), "ouroCommDumpTrace (length)");
    char* text = malloc(length + 1);
    size_t again = 0;
    check(ouroCommDumpTrace(comm, text, length + 1, &again), "ouroCommDumpTrace");
    printf("rank %d: trace %s, %.40s\n", rank, again == length && strlen(text) == length ? "whole" : "cut", text);
    free(text);
  }
  printf("rank %d: %d calls, result sum %.1f\n", rank, made, total);
  fflush(stdout);
  if (!strcmp(then, "hang")) {
    sleepOnce(hang_s);
  } else if (!strcmp(then, "barrier")) {
    check(ouroBarrier(comm), "ouroBarrier");
  }
  free(buf);
  check(ouroCommDestroy(comm), "ouroCommDestroy");
  return 0;
}
