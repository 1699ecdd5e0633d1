/* SPDX-License-Identifier: MIT */
/*
 * The RDMA transport (InfiniBand, RoCE, Soft-RoCE): one reliable-connected queue pair per stream,
 * set up through rdma_cm from the same "HOST:PORT" addresses as TCP (the device is the one whose
 * interface holds the address), frames carried as SENDs of registered buffers with receive
 * credits (rdma_flow.h). Built only where librdmacm and libibverbs are (HAK_HAVE_RDMA);
 * replication finds it with transport_find("rdma").
 */
#ifndef HAK_RDMA_H
#define HAK_RDMA_H

#include "transport.h"

extern const struct transport_ops transport_rdma;

#endif
