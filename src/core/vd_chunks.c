#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vd_chunks.h"

size_t vd_chunk_count(uint64_t size, uint32_t chunk_size)
{
	return (size_t)((size + chunk_size - 1) / chunk_size);
}

void vd_chunkmap_free(vd_chunkmap *m)
{
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < m->n_files; i++) {
		free(m->files[i].name);
		free(m->files[i].digests);
	}
	free(m->files);
	free(m);
}

vd_chunkmap *vd_chunkmap_new(const vd_mapped_file *files, size_t n, uint32_t chunk_size)
{
	vd_chunkmap *m = calloc(1, sizeof(*m));
	size_t i;

	if (m == NULL || (m->files = calloc(n ? n : 1, sizeof(*m->files))) == NULL)
		goto fail;
	m->chunk_size = chunk_size;
	for (i = 0; i < n; i++) {
		vd_chunk_file *f = &m->files[i];
		m->n_files++;
		f->name = strdup(files[i].name);
		f->size = files[i].size;
		f->n_chunks = vd_chunk_count(f->size, chunk_size);
		f->digests = calloc(f->n_chunks ? f->n_chunks : 1, 32);
		if (f->name == NULL || f->digests == NULL)
			goto fail;
	}
	return m;
fail:
	vd_chunkmap_free(m);
	return NULL;
}

int vd_chunkmap_serialize(const vd_chunkmap *m, vd_buf *out)
{
	size_t i, len;

	vd_buf_put(out, VD_CHUNKMAP_MAGIC, 5);
	vd_buf_put_u32le(out, m->chunk_size);
	vd_buf_put(out, m->meta.header, 32);
	vd_buf_putc(out, (uint8_t)(m->meta.has_index != 0));
	vd_buf_put(out, m->meta.index, 32);
	vd_buf_put_u32le(out, (uint32_t)m->n_files);
	for (i = 0; i < m->n_files; i++) {
		len = strlen(m->files[i].name);
		vd_buf_put_u32le(out, (uint32_t)len);
		vd_buf_put(out, m->files[i].name, len);
		vd_buf_put_u64le(out, m->files[i].size);
		vd_buf_put(out, m->files[i].digests, m->files[i].n_chunks * 32);
	}
	return out->oom ? -ENOMEM : 0;
}

typedef struct reader {
	const uint8_t *p, *end;
} reader;

static int take(reader *r, void *out, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return -EINVAL;
	memcpy(out, r->p, n);
	r->p += n;
	return 0;
}

static int take_u32(reader *r, uint32_t *v)
{
	uint8_t b[4];

	if (take(r, b, 4) < 0)
		return -EINVAL;
	*v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
	return 0;
}

static int take_u64(reader *r, uint64_t *v)
{
	uint32_t lo, hi;

	if (take_u32(r, &lo) < 0 || take_u32(r, &hi) < 0)
		return -EINVAL;
	*v = (uint64_t)hi << 32 | lo;
	return 0;
}

static int take_file(reader *r, vd_chunk_file *f, uint32_t chunk_size)
{
	uint32_t len;

	if (take_u32(r, &len) < 0 || len == 0 || len > 255 || (size_t)(r->end - r->p) < len)
		return -EINVAL;
	if ((f->name = calloc(1, (size_t)len + 1)) == NULL)
		return -ENOMEM;
	if (take(r, f->name, len) < 0)
		return -EINVAL;
	if (memchr(f->name, '\0', len) != NULL || take_u64(r, &f->size) < 0)
		return -EINVAL;
	f->n_chunks = vd_chunk_count(f->size, chunk_size);
	if ((size_t)(r->end - r->p) / 32 < f->n_chunks)
		return -EINVAL;
	if ((f->digests = malloc(f->n_chunks ? f->n_chunks * 32 : 1)) == NULL)
		return -ENOMEM;
	return take(r, f->digests, f->n_chunks * 32);
}

vd_chunkmap *vd_chunkmap_parse(const uint8_t *p, size_t n)
{
	reader r = { p, p + n };
	vd_chunkmap *m = calloc(1, sizeof(*m));
	uint8_t magic[5], has_index;
	uint32_t files, i;

	if (m == NULL || take(&r, magic, 5) < 0 || memcmp(magic, VD_CHUNKMAP_MAGIC, 5) != 0 ||
	    take_u32(&r, &m->chunk_size) < 0 || m->chunk_size < 4096 ||
	    take(&r, m->meta.header, 32) < 0 || take(&r, &has_index, 1) < 0 || has_index > 1 ||
	    take(&r, m->meta.index, 32) < 0 || take_u32(&r, &files) < 0 ||
	    files == 0 || files > VD_CHUNKMAP_MAX_FILES)
		goto fail;
	m->meta.has_index = has_index;
	if ((m->files = calloc(files, sizeof(*m->files))) == NULL)
		goto fail;
	for (i = 0; i < files; i++) {
		m->n_files++;
		if (take_file(&r, &m->files[i], m->chunk_size) < 0)
			goto fail;
	}
	if (r.p != r.end)
		goto fail;
	return m;
fail:
	vd_chunkmap_free(m);
	return NULL;
}

vd_chunkmap *vd_chunkmap_dup(const vd_chunkmap *m)
{
	vd_chunkmap *copy = NULL;
	vd_buf b;

	vd_buf_init(&b);
	if (vd_chunkmap_serialize(m, &b) == 0)
		copy = vd_chunkmap_parse(b.p, b.len);
	vd_buf_free(&b);
	return copy;
}
