/*
 * osb_progress.c - the progress line of `osb` transfers on a terminal:
 * bytes moved, the percentage when the size is known, and the rate,
 * redrawn four times a second by a thread that reads the client's byte
 * counters (osb_client_stats()), so the transfer itself knows nothing of
 * it. Nothing is shown when stderr is not a terminal.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "osb_tool.h"

#define PROGRESS_EVERY_MS 250

struct cli_progress {
	struct osb_client *client;
	bool up;
	int64_t total;
	uint64_t base; /* the counter when it started */
	struct timespec t0;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
};

static double since(const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) +
	       (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void human(double bytes, char *buf, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	size_t u = 0;
	while (bytes >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

static void draw(struct cli_progress *p)
{
	struct osb_client_stats st;
	char done[32], total[32], rate[32];
	double secs = since(&p->t0);

	osb_client_stats(p->client, &st);
	uint64_t now = p->up ? st.bytes_up : st.bytes_down;
	double moved = (double)(now - p->base);
	if (p->total >= 0 && moved > (double)p->total)
		moved = (double)p->total;
	human(moved, done, sizeof(done));
	human(secs > 0 ? moved / secs : 0, rate, sizeof(rate));
	if (p->total > 0) {
		human((double)p->total, total, sizeof(total));
		fprintf(stderr, "\r%s %s / %s  %3d%%  %s/s\033[K",
			p->up ? "up" : "down", done, total,
			(int)(moved * 100 / (double)p->total), rate);
	} else {
		fprintf(stderr, "\r%s %s  %s/s\033[K", p->up ? "up" : "down",
			done, rate);
	}
	fflush(stderr);
}

static void *run(void *arg)
{
	struct cli_progress *p = arg;
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += PROGRESS_EVERY_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->cond, &p->lock, &until);
		if (!p->stop)
			draw(p);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct cli_progress *progress_start(struct osb_cli *cli, bool up, int64_t total)
{
	struct osb_client_stats st;

	if (!cli->progress || !cli->client)
		return NULL;
	struct cli_progress *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->client = cli->client;
	p->up = up;
	p->total = total;
	osb_client_stats(p->client, &st);
	p->base = up ? st.bytes_up : st.bytes_down;
	clock_gettime(CLOCK_MONOTONIC, &p->t0);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	if (pthread_create(&p->thread, NULL, run, p) != 0) {
		pthread_cond_destroy(&p->cond);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return NULL;
	}
	return p;
}

void progress_end(struct cli_progress *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	draw(p);
	fputc('\n', stderr);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
