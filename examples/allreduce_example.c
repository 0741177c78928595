/* The smallest complete ouro program: every rank contributes rank+1 to each element, an
 * allreduce sums them, every rank checks and prints the result.
 *   ouro-run -n 4 allreduce_example [count]
 * Works unchanged under mpirun or srun given MASTER_ADDR/MASTER_PORT (or OURO_INIT). */
#include <stdio.h>
#include <stdlib.h>

#include "ouro/ouro.h"

#define CHECK(call)                                                                    \
  do {                                                                                 \
    ouroResult_t rc_ = (call);                                                         \
    if (rc_ != ouroSuccess) {                                                          \
      fprintf(stderr, "%s failed: %s\n", #call, ouroGetLastError(NULL));               \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

int main(int argc, char** argv) {
  size_t count = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1048576;
  ouroComm_t comm;
  CHECK(ouroCommInitFromEnv(&comm));
  int rank, nranks;
  CHECK(ouroCommUserRank(comm, &rank));
  CHECK(ouroCommCount(comm, &nranks));

  float* data = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; i++) data[i] = (float)(rank + 1);
  CHECK(ouroAllReduce(data, data, count, ouroFloat32, ouroSum, comm, NULL)); /* in place */

  float expected = (float)nranks * (float)(nranks + 1) / 2.0f;
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) wrong += data[i] != expected;
  printf("rank %d of %d: allreduce of %zu floats -> %.1f in every element (%s)\n", rank, nranks, count,
         count ? data[0] : 0.0f, wrong ? "WRONG" : "correct");
  free(data);
  CHECK(ouroCommDestroy(comm));
  return wrong ? 1 : 0;
}
