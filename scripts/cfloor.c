/*
 * cfloor.c: the copy floors of gexbench (floor-copyecho, floor-copy) with
 * glibc's memcpy in place of Go's copy(), for scripts/shm-campaign.sh: what
 * the C library's copies cost on this machine, measured in the same run.
 *
 *   cc -O2 -o cfloor scripts/cfloor.c && ./cfloor
 *
 * memcpy echo (4 KiB, 64 KiB): two processes sharing an anonymous mapping,
 * pinned to CPUs 0 and 1 where allowed. Process 0 copies n bytes from its
 * heap into buffer A of the mapping and stores a sequence number; process 1
 * waits for it, copies A into buffer B and answers with the same number:
 * an AM Medium echo's two payload copies (C GASNet's smp conduit copies a
 * Medium's payload into the receiver's shared buffer, and testam's handler
 * replies with that payload) with a flag in place of the conduit.
 * memcpy (64 KiB, 1 MiB): process 0 alone copies n bytes between two heap
 * buffers, over and over.
 *
 * Output: gexbench -csv rows (name,path,size,metric,value,unit), median and
 * min over 20 batches, in us: cfloor-memcpyecho (path shm) and
 * cfloor-memcpy (path local).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { BATCHES = 20, BUF = 64 << 10 };

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	(void)sched_setaffinity(0, sizeof s, &s); /* refused: run unpinned */
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* report prints the median and min of BATCHES per-operation times (s). */
static void report(const char *name, const char *path, size_t n, double *t)
{
	qsort(t, BATCHES, sizeof t[0], cmp);
	printf("%s,%s,%zu,median,%g,us\n", name, path, n, t[BATCHES / 2] * 1e6);
	printf("%s,%s,%zu,min,%g,us\n", name, path, n, t[0] * 1e6);
}

/* The shared mapping: the ping and pong words on lines of their own, then A and B. */
struct shared {
	_Alignas(128) _Atomic long ping;
	_Alignas(128) _Atomic long pong;
	_Alignas(4096) char a[BUF];
	_Alignas(4096) char b[BUF];
};

static void echo(struct shared *sh, size_t n, long iters)
{
	char *src = aligned_alloc(4096, BUF);
	memset(src, 0x5a, BUF);
	atomic_store(&sh->ping, 0);
	atomic_store(&sh->pong, 0);
	pid_t pid = fork();
	if (pid == 0) {
		pin(1);
		for (long i = 1;; i++) {
			long v;
			while ((v = atomic_load_explicit(&sh->ping, memory_order_acquire)) < i && v >= 0)
				;
			if (v < 0)
				_exit(0);
			memcpy(sh->b, sh->a, n);
			atomic_store_explicit(&sh->pong, i, memory_order_release);
		}
	}
	pin(0);
	double t[BATCHES];
	long seq = 0;
	for (int k = -1; k < BATCHES; k++) { /* batch -1 warms up */
		double t0 = now();
		for (long i = 0; i < iters; i++) {
			memcpy(sh->a, src, n);
			atomic_store_explicit(&sh->ping, ++seq, memory_order_release);
			while (atomic_load_explicit(&sh->pong, memory_order_acquire) < seq)
				;
		}
		if (k >= 0)
			t[k] = (now() - t0) / iters;
	}
	atomic_store_explicit(&sh->ping, -1, memory_order_release);
	waitpid(pid, NULL, 0);
	if (memcmp(sh->b, src, n) != 0) {
		fprintf(stderr, "cfloor: the %zu-byte echo did not arrive\n", n);
		exit(1);
	}
	report("cfloor-memcpyecho", "shm", n, t);
	free(src);
}

static void local(size_t n)
{
	char *src = aligned_alloc(4096, n), *dst = aligned_alloc(4096, n);
	memset(src, 0x3c, n);
	memset(dst, 0, n);
	long iters = (64 << 20) / n;
	double t[BATCHES];
	for (int k = -1; k < BATCHES; k++) {
		double t0 = now();
		for (long i = 0; i < iters; i++) {
			memcpy(dst, src, n);
			__asm__ volatile("" : : "r"(dst) : "memory"); /* keep every copy */
		}
		if (k >= 0)
			t[k] = (now() - t0) / iters;
	}
	if (memcmp(dst, src, n) != 0) {
		fprintf(stderr, "cfloor: the %zu-byte copy differs\n", n);
		exit(1);
	}
	report("cfloor-memcpy", "local", n, t);
	free(src);
	free(dst);
}

int main(void)
{
	struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("cfloor: mmap");
		return 1;
	}
	memset(sh, 0, sizeof *sh);
	echo(sh, 4 << 10, 10000);
	echo(sh, 64 << 10, 1000);
	local(64 << 10);
	local(1 << 20);
	return 0;
}
