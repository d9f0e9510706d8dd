/* Preloaded into NetPIPE (NPopenmpi) by ci/bench/mpi: its MPI_Init
 * becomes MPI_Init_thread(MPI_THREAD_FUNNELED), the level ovbench's MPI
 * transport asks for. Open MPI turns its internal locking on for every
 * level above MPI_THREAD_SINGLE (ompi_mpi_init: opal_set_using_threads),
 * which costs each message a few mutex and wait-sync calls; with this
 * both tools run the library in the same mode. NetPIPE's loop and timing
 * are untouched. */
#include <mpi.h>

int MPI_Init(int *argc, char ***argv)
{
    int provided;
    return PMPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
}
