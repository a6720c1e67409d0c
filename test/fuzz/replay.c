/*
 * test/fuzz/replay.c
 *		main() for a fuzz target built without libFuzzer (gcc, ASan and
 *		UBSan): runs each file named on the command line through the
 *		target's LLVMFuzzerTestOneInput once, so that make test checks the
 *		targets' invariants on the committed seeds and crash inputs.
 *		Prints one "test NAME ... ok" line per file, as pg_regress does, for
 *		test/run to count; a broken invariant aborts, after the "test NAME"
 *		of the input that broke it.
 *
 *		replay TARGET FILE...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
main(int argc, char **argv)
{
	for (int i = 2; i < argc; i++)
	{
		FILE	   *f = fopen(argv[i], "rb");
		const char *base = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
		uint8_t    *data;
		long		size;

		printf("test fuzz %s %-30s ... ", argv[1], base);
		fflush(stdout);
		if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
		{
			printf("FAILED (cannot read %s)\n", argv[i]);
			return 1;
		}
		data = malloc(size + 1);
		if (fread(data, 1, size, f) != (size_t) size)
		{
			printf("FAILED (cannot read %s)\n", argv[i]);
			return 1;
		}
		fclose(f);
		LLVMFuzzerTestOneInput(data, (size_t) size);
		free(data);
		printf("ok\n");
	}
	return 0;
}
