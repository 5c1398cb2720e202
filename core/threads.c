#define LOG_PREFIX "threads: "
#include <string.h>

#include "log.h"
#include "threads.h"
#include "tls.h"

int threads_stop(char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return 0;
}

int threads_collect(struct region *out, int max)
{
	(void)out;
	(void)max;
	return 0;
}

int threads_save(struct image_region *out, int max, char *err, size_t errlen)
{
	int ret;

	if (max < 1) {
		stasis_errf(err, errlen, "too many regions");
		return -ENOSPC;
	}
	ret = tls_save_begin(1);
	if (!ret)
		ret = tls_save_thread(0, 0);
	if (!ret)
		ret = tls_save_end(&out[0]);
	if (ret) {
		stasis_errf(err, errlen, "cannot save the thread-local storage: %s",
			    strerror(-ret));
		return ret;
	}
	return 1;
}

void threads_resume(void)
{
}

int threads_restore(const void *tls, size_t tls_len, char *why, size_t whylen)
{
	int ret;

	if (!tls) {
		stasis_errf(why, whylen, "the image holds no thread-local storage");
		return -EBADMSG;
	}
	ret = tls_restore_keys(tls, tls_len, why, whylen);
	if (!ret)
		ret = tls_restore_thread(tls, tls_len, 0, why, whylen);
	return ret;
}

void threads_release(void)
{
}
