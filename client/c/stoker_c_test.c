/* The C ABI from plain C (no C++ type can cross it): a real stokerd and a
 * generated dataset, both from the test's runfiles. Prints "N passed, N
 * failed" and exits non-zero on any failure. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/c/stoker.h"

static int passed = 0, failed = 0;
#define CHECK(cond)                                                  \
  do {                                                               \
    if (cond) {                                                      \
      ++passed;                                                      \
    } else {                                                         \
      ++failed;                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                \
    }                                                                \
  } while (0)

int main(void) {
  char dir[] = "/tmp/stoker-ctest-XXXXXX";
  if (mkdtemp(dir) == NULL) return 2;
  char cmd[512], sock[256], data[256];
  snprintf(data, sizeof(data), "%s/data", dir);
  snprintf(sock, sizeof(sock), "%s/s.sock", dir);
  snprintf(cmd, sizeof(cmd),
           "tests/make_dataset --out %s --classes 2 --per_class 3 "
           "--min_side 40 --max_side 60 >/dev/null", data);
  if (system(cmd) != 0) return 2;

  CHECK(stoker_abi_version() == STOKER_ABI_VERSION);
  CHECK(strlen(stoker_version()) > 0);

  stoker_error err;
  stoker_client* client = NULL;
  memset(&err, 0, sizeof(err));

  /* Naming a dataset: a recognised path, or one source as JSON. */
  char* named = NULL;
  CHECK(stoker_dataset_json(data, NULL, &named, &err) == STOKER_OK);
  CHECK(named != NULL && strstr(named, "\"folder\":{\"path\":\"") != NULL);
  stoker_string_free(named);
  CHECK(stoker_dataset_json("{\"npy\": {\"path\": \"/x.npy\"}, \"lmdb\": {}}", "", &named,
                            &err) == 3);
  CHECK(stoker_dataset_json(data, "/elsewhere", &named, &err) == 3);
  CHECK(strstr(err.message, "root applies to a manifest") != NULL);
  CHECK(stoker_dataset_json(NULL, NULL, &named, &err) == 3);

  /* The daemon's rules, without a daemon. */
  CHECK(stoker_check_spec("{\"dataset\": {\"folder\": {\"path\": \"/d\"}}, "
                          "\"batch_size\": 8, \"transform\": \"val\", "
                          "\"image_size\": 32}", &err) == STOKER_OK);
  CHECK(stoker_check_spec("{\"dataset\": {\"folder\": {\"path\": \"/d\"}}, "
                          "\"batch_size\": 8, \"transform\": \"val\", "
                          "\"image_size\": 5000}", &err) == 3);
  CHECK(strstr(err.message, "image_size 5000 must be in 1..4096") != NULL);
  CHECK(stoker_check_spec("{\"batch_size\": \"many\"}", &err) == 3);
  CHECK(strstr(err.message, "batch_size") != NULL);
  CHECK(stoker_check_spec(NULL, &err) == 3);
  CHECK(stoker_connect(sock, 0.2, &client, &err) == 14); /* UNAVAILABLE */
  CHECK(err.code == 14 && strstr(err.message, sock) != NULL);
  CHECK(stoker_connect(NULL, 1, &client, &err) == 3);

  pid_t daemon = fork();
  if (daemon == 0) {
    execl("server/stokerd", "stokerd", "--socket", sock, "--threads", "1",
          "--metrics-address", "", "--allow-root", (char*)NULL);
    _exit(127);
  }
  CHECK(stoker_connect(sock, 20, &client, &err) == STOKER_OK);
  if (client == NULL) {
    kill(daemon, SIGKILL);
    fprintf(stderr, "no daemon: %s\n", err.message);
    return 1;
  }

  stoker_session* session = NULL;
  CHECK(stoker_open_session(client, "{\"batch_size\": \"many\"}", &session,
                            &err) == 3); /* INVALID_ARGUMENT: not the schema */
  char spec[512];
  snprintf(spec, sizeof(spec),
           "{\"dataset\": {\"folder\": {\"path\": \"%s/missing\"}},"
           " \"batch_size\": 4, \"transform\": \"VAL\", \"image_size\": 8}",
           dir);
  CHECK(stoker_open_session(client, spec, &session, &err) == 5); /* NOT_FOUND */
  /* Short enum names; a wrong one is named with the names it takes. */
  snprintf(spec, sizeof(spec),
           "{\"dataset\": {\"folder\": {\"path\": \"%s\"}},"
           " \"batch_size\": 4, \"transform\": \"sideways\", \"image_size\": 8}",
           data);
  CHECK(stoker_open_session(client, spec, &session, &err) == 3);
  CHECK(strstr(err.message, "transform must be one of val, train") != NULL);
  snprintf(spec, sizeof(spec),
           "{\"dataset\": {\"folder\": {\"path\": \"%s\"}},"
           " \"batch_size\": 4, \"transform\": \"val\", \"image_size\": 8}",
           data);
  CHECK(stoker_open_session(client, spec, &session, &err) == STOKER_OK);
  char* info = NULL;
  CHECK(stoker_session_info_json(session, &info, &err) == STOKER_OK);
  CHECK(info != NULL && strstr(info, "\"batches_per_epoch\":2") != NULL);
  stoker_string_free(info);

  int samples = 0, label_sum = 0;
  for (int i = 0; i < 2; ++i) {
    stoker_batch* batch = NULL;
    CHECK(stoker_next(session, 20, &batch, &err) == STOKER_OK);
    if (batch == NULL) break;
    stoker_batch_info b;
    CHECK(stoker_batch_get_info(batch, &b, sizeof(b)) == STOKER_OK);
    CHECK(b.dtype == STOKER_DTYPE_UINT8 && b.ndim == 4);
    CHECK(b.shape[1] == 8 && b.shape[2] == 8 && b.shape[3] == 3);
    CHECK(b.batch_index == (uint64_t)i && b.epoch == 0);
    CHECK(b.size_bytes == b.shape[0] * 8 * 8 * 3);
    /* The same batch as named fields: "image" [n, 8, 8, 3], "label" [n]. */
    CHECK(stoker_batch_field_count(batch) == 2);
    stoker_field_info image, label;
    CHECK(stoker_batch_get_field(batch, 0, &image, sizeof(image)) == STOKER_OK);
    CHECK(stoker_batch_get_field(batch, 1, &label, sizeof(label)) == STOKER_OK);
    CHECK(stoker_batch_get_field(batch, 2, &label, sizeof(label)) == 3);
    CHECK(strcmp(image.name, "image") == 0 && image.data == b.data);
    CHECK(image.ndim == 4 && image.shape[3] == 3);
    CHECK(strcmp(label.name, "label") == 0 && label.dtype == STOKER_DTYPE_INT32);
    CHECK(label.ndim == 1 && label.shape[0] == b.samples);
    CHECK(label.data == (const void*)b.labels);
    for (uint32_t k = 0; k < b.samples; ++k) {
      CHECK(b.status[k] == STOKER_SAMPLE_OK);
      label_sum += b.labels[k];
    }
    samples += (int)b.samples;
    stoker_batch_release(batch);
  }
  CHECK(samples == 6);
  CHECK(label_sum == 3); /* Three samples of class 1. */

  char* stats = NULL;
  CHECK(stoker_stats_json(client, &stats, &err) == STOKER_OK);
  CHECK(stats != NULL && strstr(stats, "\"sessions_opened\":1") != NULL);
  stoker_string_free(stats);
  CHECK(stoker_health(client, &err) == STOKER_OK);

  CHECK(stoker_session_close(session, &err) == STOKER_OK);
  stoker_batch* after = NULL;
  CHECK(stoker_next(session, 1, &after, &err) == 9); /* FAILED_PRECONDITION */
  stoker_session_free(session);
  stoker_client_free(client);

  stoker_checksum c;
  stoker_checksum_init(&c);
  stoker_checksum_update(&c, "stoker", 6);
  CHECK(stoker_checksum_value(&c) != 0);

  kill(daemon, SIGTERM);
  int status = 0;
  waitpid(daemon, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
