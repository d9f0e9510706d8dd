/* A PMPI profiling layer for tests/mpi_e2e.rs: counts the one-sided
 * calls a rank makes (MPI_Put, MPI_Get, MPI_Win_flush) and, at
 * MPI_Finalize, writes them to $PMPI_COUNT_DIR/rank<N>.txt as
 * "puts gets flushes". Preloaded (LD_PRELOAD) into ovbench, it sees the
 * calls as the library does, independently of ovbench's own counting. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static long n_put, n_get, n_flush;

int MPI_Put(const void *origin, int ocount, MPI_Datatype otype, int target,
            MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Win win)
{
    n_put++;
    return PMPI_Put(origin, ocount, otype, target, disp, tcount, ttype, win);
}

int MPI_Get(void *origin, int ocount, MPI_Datatype otype, int target,
            MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Win win)
{
    n_get++;
    return PMPI_Get(origin, ocount, otype, target, disp, tcount, ttype, win);
}

int MPI_Win_flush(int rank, MPI_Win win)
{
    n_flush++;
    return PMPI_Win_flush(rank, win);
}

int MPI_Finalize(void)
{
    const char *dir = getenv("PMPI_COUNT_DIR");
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%ld %ld %ld\n", n_put, n_get, n_flush);
            fclose(f);
        }
    }
    return PMPI_Finalize();
}
